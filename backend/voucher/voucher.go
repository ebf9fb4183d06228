// Package voucher decides reservations of voucher uses: eligibility, the guarded database path
// for normal vouchers, and the Redis gate followed by a synchronous database write for
// flash-sale vouchers. It knows vouchers, not HTTP, SQL or Lua: those sit behind Store and Gate.
package voucher

import (
	"time"

	"vouchergate/shared/wire"
)

// Voucher is a voucher's definition. An edit (Service.Edit) changes it and raises its Revision;
// FlashSale and Code never change.
type Voucher struct {
	Code           string
	DiscountAmount int64 // a fixed amount off; 0 when DiscountPercent is set
	// DiscountPercent (1–100) takes a percentage of the order off instead, at most
	// MaxDiscountAmount when that is set; 0: the fixed DiscountAmount.
	DiscountPercent   int
	MaxDiscountAmount *int64
	MinOrderAmount    int64
	TotalLimit        int
	PerUserLimit      int
	StartsAt          time.Time
	EndsAt            time.Time
	FlashSale         bool
	Paused            bool          // new reservations are refused (ErrPaused); the admin API's active is its opposite
	HoldTTL           time.Duration // how long its reservations are held unless confirmed; 0: the service's (VG_HOLD_TTL)
	Revision          int64         // raised by every edit; 1 as created
	// Opened: an edit found it open already, so orders may exist even before StartsAt (a start
	// moved later); a voucher never opened has none before its start.
	Opened bool
}

// Open reports whether reservations are accepted at now: from StartsAt, before EndsAt.
func (v Voucher) Open(now time.Time) bool { return !now.Before(v.StartsAt) && now.Before(v.EndsAt) }

// Refusal is why the voucher refuses a new reservation of an order of amount at now, nil when it
// takes one (uses and the customer's limit aside): ErrPaused first (the operator's word stands
// whatever the period), then ErrNotStarted or ErrEnded, then ErrOrderTooSmall.
func (v Voucher) Refusal(now time.Time, amount int64) error {
	switch {
	case v.Paused:
		return ErrPaused
	case now.Before(v.StartsAt):
		return ErrNotStarted
	case !now.Before(v.EndsAt):
		return ErrEnded
	case amount < v.MinOrderAmount:
		return ErrOrderTooSmall
	}
	return nil
}

// Discount is what the voucher takes off an order of amount (in the order's minor units): the
// fixed amount, or floor(amount × percent / 100) capped by MaxDiscountAmount; never more than
// the amount itself.
func (v Voucher) Discount(amount int64) int64 {
	if v.DiscountPercent == 0 {
		return min(v.DiscountAmount, amount)
	}
	d := PercentOf(amount, v.DiscountPercent)
	if v.MaxDiscountAmount != nil {
		d = min(d, *v.MaxDiscountAmount)
	}
	return min(d, amount)
}

// PercentOf is floor(amount × percent / 100) for amount ≥ 0 and percent 0–100, without the
// overflow of the product: amount = 100q + r gives q × percent + floor(r × percent / 100).
func PercentOf(amount int64, percent int) int64 {
	p := int64(percent)
	return amount/100*p + amount%100*p/100
}

// holdTTL is how long a reservation of v made now is held: its own HoldTTL, else def.
func (v Voucher) holdTTL(def time.Duration) time.Duration {
	if v.HoldTTL > 0 {
		return v.HoldTTL
	}
	return def
}

// Redemption is one order's use of a voucher, as the database holds it.
type Redemption struct {
	VoucherCode    string
	CustomerID     string
	OrderID        string
	Status         string // wire.StatusReserved, StatusConfirmed, StatusReleased or StatusRefunded
	OrderAmount    int64
	DiscountAmount int64
	ReservedAt     time.Time
	HoldExpiresAt  time.Time
}

// Active reports whether the redemption holds a use (RESERVED or CONFIRMED).
func (r Redemption) Active() bool {
	return r.Status == wire.StatusReserved || r.Status == wire.StatusConfirmed
}

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
	Revision     int64 // the voucher's revision read with it: a cached copy of another is stale
	CustomerUses int   // the customer's active redemptions of the voucher: LookupCustomer only
}

// Usage is a voucher with its counts by status, for the admin API.
type Usage struct {
	Voucher
	UsedCount      int
	ByStatus       map[string]int
	RedisRemaining *int64 // flash vouchers loaded in Redis only
}
