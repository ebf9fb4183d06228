// Package voucher decides reservations of voucher uses: eligibility, the guarded database path
// for normal vouchers, and the Redis gate followed by a synchronous database write for
// flash-sale vouchers. It knows vouchers, not HTTP, SQL or Lua: those sit behind Store and Gate.
package voucher

import (
	"time"
	"vouchergate/shared/wire"
)

// Voucher is a voucher's definition. It does not change once created.
type Voucher struct {
	Code           string
	DiscountAmount int64
	MinOrderAmount int64
	TotalLimit     int
	PerUserLimit   int
	StartsAt       time.Time
	EndsAt         time.Time
	FlashSale      bool
}

// Open reports whether reservations are accepted at now: from StartsAt, before EndsAt.
func (v Voucher) Open(now time.Time) bool { return !now.Before(v.StartsAt) && now.Before(v.EndsAt) }

// Discount is what the voucher takes off an order of amount: its discount, at most the amount.
func (v Voucher) Discount(amount int64) int64 { return min(v.DiscountAmount, amount) }

// Redemption is one order's use of a voucher, as the database holds it.
type Redemption struct {
	VoucherCode    string
	CustomerID     string
	OrderID        string
	Status         string // wire.StatusReserved, StatusConfirmed or StatusReleased
	OrderAmount    int64
	DiscountAmount int64
	ReservedAt     time.Time
	HoldExpiresAt  time.Time
}

// Active reports whether the redemption holds a use (RESERVED or CONFIRMED).
func (r Redemption) Active() bool { return r.Status != wire.StatusReleased }

// Hold is a reservation to write: who, for which order, what it grants, and until when it is
// held unless confirmed.
type Hold struct {
	VoucherCode    string
	CustomerID     string
	OrderID        string
	OrderAmount    int64
	DiscountAmount int64
	ReservedAt     time.Time
	ExpiresAt      time.Time
}

// Written is one hold's outcome in a batch: its redemption, or why it was not written.
type Written struct {
	Redemption Redemption
	Err        error
}

// Lookup is what a normal reservation reads before it takes a use: the order's redemption,
// if any, and whether the voucher has no use left.
type Lookup struct {
	Existing     *Redemption
	SoldOut      bool
	CustomerUses int // the customer's active redemptions of the voucher: LookupCustomer only
}

// Usage is a voucher with its counts by status, for the admin API.
type Usage struct {
	Voucher
	UsedCount      int
	ByStatus       map[string]int
	RedisRemaining *int64 // flash vouchers loaded in Redis only
}
