package voucher

import (
	"context"
	"time"

	"vouchergate/shared/events"
)

// Store is the source of truth. Implementations MUST be safe for concurrent use and MUST keep
// the invariants by themselves (used_count within total_limit and equal to the active
// redemptions, one redemption per orderId, per_user_limit per customer), whatever the caller.
type Store interface {
	CreateVoucher(ctx context.Context, v Voucher) error
	// Voucher returns ErrVoucherNotFound when no voucher has code.
	Voucher(ctx context.Context, code string) (Voucher, error)
	Stats(ctx context.Context, code string) (Usage, error)
	// Redemption returns ErrReservationNotFound when the orderId has no redemption.
	Redemption(ctx context.Context, orderID string) (Redemption, error)
	// ShopperOrders returns up to limit of the voucher's redemptions that shoppers made
	// (wire.ShopperOrderID) for the client orderId orderID, RESERVED and CONFIRMED ones first.
	ShopperOrders(ctx context.Context, code, orderID string, limit int) ([]Redemption, error)
	// Lookup reads the order's redemption and whether the voucher is sold out, without locks;
	// ErrVoucherNotFound when no voucher has code.
	Lookup(ctx context.Context, code, orderID string) (Lookup, error)
	// LookupCustomer is Lookup that also counts the customer's RESERVED and CONFIRMED
	// redemptions of the voucher (Lookup.CustomerUses), all in one snapshot: a dry run's read
	// of what the guarded write would compare with per_user_limit.
	LookupCustomer(ctx context.Context, code, orderID, customerID string) (Lookup, error)
	// Reserve takes one use for h in one transaction at now, or returns ErrOutOfStock,
	// ErrNotEligible (closed at now), ErrAlreadyUsed (customer at limit), ErrOrderExists, or
	// an infrastructure error (wrapping ErrNotWritten when certainly nothing was committed).
	Reserve(ctx context.Context, h Hold, now time.Time) (Redemption, error)
	// ReserveMany takes one use for each hold of the voucher code, and answers each hold on its
	// own, in order: its redemption, or ErrNotEligible, ErrOutOfStock, ErrAlreadyUsed or
	// ErrOrderExists where Reserve would refuse that hold after the ones before it; a refused
	// hold never fails the others. The holds go in one transaction that locks the voucher row
	// first; a hold whose orderId an earlier hold of the batch carries, and one that
	// transaction left out but Reserve might grant, are written after it, each in a
	// transaction of its own. A returned error concerns every hold: ErrVoucherNotFound, or an
	// infrastructure error wrapping ErrNotWritten when certainly nothing was committed,
	// otherwise leaving every hold's outcome unknown (the holds that were to follow the
	// transaction too: they were not sent, but their orderIds may have been written).
	ReserveMany(ctx context.Context, code string, holds []Hold) ([]Written, error)
	// Confirm confirms a RESERVED redemption; confirming a CONFIRMED one returns it unchanged.
	// It returns ErrReleased, ErrReservationNotFound or ErrVoucherNotFound.
	Confirm(ctx context.Context, code, orderID string, now time.Time) (Redemption, error)
	// Release releases a RESERVED redemption and gives its use back in the same transaction;
	// released is false when it was released before. It returns ErrConfirmed,
	// ErrReservationNotFound or ErrVoucherNotFound.
	Release(ctx context.Context, code, orderID string, now time.Time) (r Redemption, released bool, err error)
	// Refund refunds a CONFIRMED redemption and gives its use back (used_count, the customer's
	// slot) in the same transaction, which locks the voucher row first; refunded is false when
	// it was refunded before. It returns ErrNotConfirmed (RESERVED), ErrReleased,
	// ErrReservationNotFound or ErrVoucherNotFound.
	Refund(ctx context.Context, code, orderID string, now time.Time) (r Redemption, refunded bool, err error)
	// EditVoucher changes the voucher code in one transaction that first locks its row FOR
	// UPDATE, so no reservation, release, refund or other edit of it commits meanwhile. edit
	// gets the voucher and its used_count as they stand and returns the voucher as it must be,
	// or a refusal (nothing is written). When that differs from the voucher, hold runs next,
	// still under the lock (an error from it writes nothing), then the new definition is written
	// with Revision + 1 and the change recorded (Diff) at at, and committed. It returns the
	// voucher before and after, equal when nothing changed. Errors: ErrVoucherNotFound, edit's
	// and hold's; an infrastructure error wraps ErrNotWritten when certainly nothing was
	// committed, otherwise the outcome is unknown.
	EditVoucher(ctx context.Context, code string, at time.Time, edit func(v Voucher, used int) (Voucher, error),
		hold func(ctx context.Context, before, after Voucher) error) (before, after Voucher, err error)
	// WithVoucher runs fn with the voucher read under a lock that an edit waits for (FOR KEY
	// SHARE, which reservations do not), so the definition fn sees stays the database's until fn
	// returns. ErrVoucherNotFound.
	WithVoucher(ctx context.Context, code string, fn func(ctx context.Context, v Voucher) error) error
	// DeleteVoucher deletes a voucher that has never been redeemed (nor had a redemption
	// released or refunded): ErrVoucherInUse otherwise, ErrVoucherNotFound.
	DeleteVoucher(ctx context.Context, code string) error
	// ActiveRedemptions lists the voucher's RESERVED and CONFIRMED redemptions.
	ActiveRedemptions(ctx context.Context, code string) ([]Redemption, error)
	// ExpireHolds releases up to limit RESERVED redemptions whose hold expired at now, with
	// used_count, once however many callers run it; it returns what it released.
	ExpireHolds(ctx context.Context, now time.Time, limit int) ([]Redemption, error)
	// FlashVouchers lists the flash vouchers that end after since.
	FlashVouchers(ctx context.Context, since time.Time) ([]Voucher, error)
}

// GateOutcome is what the Redis gate decided for a reservation.
type GateOutcome int

// Gate outcomes.
const (
	GateReserved   GateOutcome = iota + 1 // a use was taken for the order
	GateHeld                              // the order already holds a use
	GateOutOfStock                        // no use left
	GateAtLimit                           // the customer holds per_user_limit uses
	GateNotLoaded                         // the voucher is not in Redis
	GateStale                             // the gate holds another revision of the voucher than the caller's
	GatePaused                            // the gate holds the voucher paused
)

// GateResult is the gate's answer: for GateReserved the uses left after the take, for
// GateHeld the holder the order was stored with, for GateStale the revision the gate holds (0:
// none).
type GateResult struct {
	Outcome   GateOutcome
	Remaining int64
	Holder    Holder
	Revision  int64
}

// ConfigureMode says when Gate.Configure gives the gate a definition: ConfigureNewer, or
// ConfigureForce, either with ConfigureChecked or not.
type ConfigureMode int

// Configure modes.
const (
	// ConfigureNewer applies a definition newer than the gate's (by revision), else nothing.
	ConfigureNewer ConfigureMode = 0
	// ConfigureForce applies the definition whatever the gate holds: the database's, when the
	// gate holds a revision the database never committed (an edit whose commit failed).
	ConfigureForce ConfigureMode = 1 << iota
	// ConfigureChecked refuses a total_limit below the uses the gate holds (orders being
	// written included): an edit lowering the limit.
	ConfigureChecked
)

// Configured is what Gate.Configure did: whether it applied the definition or Refused it
// (ConfigureChecked), the revision the gate held before (0: none), the uses it holds, and for
// a loaded voucher the uses left after.
type Configured struct {
	Applied, Refused, Loaded bool
	HeldRevision             int64
	Held, Remaining          int64
}

// GatePeek is what the gate holds for one order and customer, read without changing anything:
// the order's holder if it holds a use; otherwise, when loaded, the uses left and the
// customer's active uses.
type GatePeek struct {
	Loaded       bool
	Holder       *Holder
	Remaining    int64
	CustomerUses int64
}

// Holder says which attempt of which customer's order holds a use in the gate, since when.
// Attempt tells apart two tries of one order, so one never gives back the other's use.
type Holder struct {
	CustomerID string
	ReservedAt time.Time
	Attempt    string // no ':'; LoadedAttempt for a hold loaded from the database
}

// LoadedAttempt is the Attempt of a hold the gate loaded or put back from a database row.
const LoadedAttempt = "db"

// Same reports whether h and o are the same holder, at the gate's millisecond precision.
func (h Holder) Same(o Holder) bool {
	return h.CustomerID == o.CustomerID && h.Attempt == o.Attempt && h.ReservedAt.UnixMilli() == o.ReservedAt.UnixMilli()
}

// Gate is the flash-sale admission in Redis: each call is atomic, one round trip.
// Implementations MUST be safe for concurrent use. Every method returns an error when Redis
// does not answer within the gate's timeout; none blocks longer.
type Gate interface {
	// Reserve takes a use for the order under v's definition; GateStale when the gate holds
	// another revision of it (the caller reads the voucher again, or configures the gate with
	// its newer one, and decides again).
	Reserve(ctx context.Context, v Voucher, orderID string, h Holder) (GateResult, error)
	// Configure gives the gate v's definition (revision, total_limit, per_user_limit, paused) as
	// mode says, atomically with respect to every reservation: remaining becomes total_limit
	// minus the orders held (R1), also when the voucher is loaded later.
	Configure(ctx context.Context, v Voucher, mode ConfigureMode) (Configured, error)
	// Release gives back the use orderID holds, if it holds one and (when expect is not nil)
	// it is held by *expect; remaining is the uses left after it (-1 if not loaded).
	Release(ctx context.Context, code, orderID string, expect *Holder) (released bool, remaining int64, err error)
	// Load loads the voucher from its active redemptions unless it is loaded; loading twice
	// never adds uses. It takes v's definition unless the gate holds a newer one (Configure
	// before the load), whose total_limit it then counts from.
	Load(ctx context.Context, v Voucher, active []Redemption) (remaining int64, err error)
	// Holding returns the holder of orderID, if any.
	Holding(ctx context.Context, code, orderID string) (Holder, bool, error)
	// Peek reads what Reserve would decide on for the order and customer, changing nothing:
	// no use is taken, no version raised.
	Peek(ctx context.Context, code, orderID, customerID string) (GatePeek, error)
	// Remaining returns the uses left, and false if the voucher is not loaded.
	Remaining(ctx context.Context, code string) (int64, bool, error)
	// Orders lists the orderIds holding a use.
	Orders(ctx context.Context, code string) ([]string, error)
	// Holders returns every order holding a use, with its holder.
	Holders(ctx context.Context, code string) (map[string]Holder, error)
	// Missing returns those of rs whose order holds no use in the gate for the row's
	// customer: not held, or held for another customer (all of them when the voucher is not
	// loaded).
	Missing(ctx context.Context, code string, rs []Redemption) ([]Redemption, error)
	// PutBack holds a use for an active redemption the gate lost; false if it holds one for
	// r's customer already or the voucher is not loaded. It may take remaining below zero
	// (Redis had sold the use again); reserve.lua then refuses until a hanging use is released.
	// An order held for another customer MUST become r's, in the same use: that take can never
	// be written (one redemption per orderId), and its attempt must find nothing to give back.
	PutBack(ctx context.Context, r Redemption) (bool, error)
	// Recount restores remaining + held orders = total_limit and the per-customer counts, with
	// the total_limit of the definition the gate holds (v's when it holds none).
	Recount(ctx context.Context, v Voucher) (Recount, error)
	// Forget deletes the voucher from the gate; false if it was not loaded. Only for a voucher
	// over long enough that no hold or write of it can be left: a call after it loads it anew.
	Forget(ctx context.Context, code string) (bool, error)
}

// Recount is what Gate.Recount found: uses left before and after, and whether the
// per-customer counts had to be rebuilt.
type Recount struct {
	Loaded        bool
	Before, After int64
	UsersFixed    bool
}

// Notifier tells the edges about sold-out state. Calls never block on the network.
type Notifier interface {
	// SoldOut says the last use of code went or a request found none left.
	SoldOut(code string)
	// BackInStock says a release made a use of code available again.
	BackInStock(code string)
	// HoldersChanged says orders were put back in Redis, or the voucher was paused, resumed or
	// given another limit: its state must be published again, whatever was published last.
	HoldersChanged(code string)
	// Deleted says the voucher is gone: the edges must forget whatever they hold of it.
	Deleted(code string)
	// State reads, now, the sold-out state the edges are told: sold out or not, and when sold
	// out which orders hold a use. Unlike the others it waits for Redis.
	State(ctx context.Context, code string) (events.VoucherState, error)
}
