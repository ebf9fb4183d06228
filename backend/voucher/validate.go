package voucher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"vouchergate/shared/wire"
)

// Validate answers what Reserve would answer for req now, taking no use and writing nothing: in
// the database, in Redis, or to the edges. A grant is the redemption Reserve would return (its
// DiscountAmount is what matters); a refusal is the domain outcome Reserve would return
// (ErrOutOfStock, ErrAlreadyUsed, ErrNotEligible, ErrReleased). An orderId already granted is
// answered with its redemption, as a retry would be.
//
// It is advisory: a use may go or come back between Validate and Reserve. It reads what the
// reservation's own path reads, in the same order: the gate's keys (peek.lua) for a flash
// voucher, the lock-free lookup for a normal one. Where Reserve would first change state (warm
// a flash voucher Redis lacks, or wait for an order still being written) it answers from the
// database instead, as that change or wait would end.
//
// Errors: those refusals, ErrVoucherNotFound, ErrUnavailable.
func (s *Service) Validate(ctx context.Context, req Request) (Redemption, error) {
	v, err := s.voucher(ctx, req.Code)
	if err != nil {
		return Redemption{}, s.unavailable(err, "validate %s: read voucher", req.Code)
	}
	now := s.cfg.Clock.Now()
	if why := v.Refusal(now, req.OrderAmount); why != nil {
		return s.closed(ctx, v, req, now, why)
	}
	grant := Redemption{VoucherCode: v.Code, CustomerID: req.CustomerID, OrderID: req.OrderID,
		Status: wire.StatusReserved, OrderAmount: req.OrderAmount, DiscountAmount: v.Discount(req.OrderAmount),
		ReservedAt: now, HoldExpiresAt: now.Add(v.holdTTL(s.cfg.HoldTTL))}
	if v.FlashSale {
		return s.validateFlash(ctx, v, req, grant)
	}
	return s.validateInDB(ctx, v, req, grant)
}

// validateInDB reads what a normal reservation decides on, in one snapshot: the lock-free
// lookup (a retry, or sold out) and the customer's active uses, which the guarded write
// compares with per_user_limit. One snapshot, so an order of the customer's that commits
// meanwhile is seen either as this order's row or not at all, never as the customer's limit.
func (s *Service) validateInDB(ctx context.Context, v Voucher, req Request, grant Redemption) (Redemption, error) {
	seen, err := s.store.LookupCustomer(ctx, v.Code, req.OrderID, req.CustomerID)
	switch {
	case err != nil:
		return Redemption{}, s.unavailable(err, "validate %s: look up order", v.Code)
	case seen.Existing != nil:
		return answerRetry(req, *seen.Existing)
	case seen.SoldOut:
		return Redemption{}, ErrOutOfStock
	case seen.CustomerUses >= v.PerUserLimit:
		return Redemption{}, ErrAlreadyUsed
	}
	return grant, nil
}

// validateFlash reads, with peek.lua, the gate's keys reserve.lua would read, and decides as it
// and the write after it would.
func (s *Service) validateFlash(ctx context.Context, v Voucher, req Request, grant Redemption) (Redemption, error) {
	if s.gate == nil {
		return Redemption{}, fmt.Errorf("validate %s: no redis gate: %w", v.Code, ErrUnavailable)
	}
	p, err := s.gate.Peek(ctx, v.Code, req.OrderID, req.CustomerID)
	switch {
	case err != nil:
		return Redemption{}, s.unavailable(err, "validate %s: redis gate", v.Code)
	case p.Holder != nil && p.Holder.CustomerID != req.CustomerID:
		return Redemption{}, fmt.Errorf("order %s belongs to another customer: %w", wire.ClientOrderID(req.OrderID), ErrAlreadyUsed)
	case p.Holder != nil:
		// A retry of an order Redis holds: Reserve answers from its row, or waits for the
		// first attempt's write, which will most likely grant it.
		return s.fromRow(ctx, req, grant)
	case !p.Loaded:
		// Reserve would warm the voucher from its active rows: the database says what it
		// would then find.
		return s.validateInDB(ctx, v, req, grant)
	case p.Remaining <= 0:
		return Redemption{}, ErrOutOfStock
	case p.CustomerUses >= int64(v.PerUserLimit):
		return Redemption{}, ErrAlreadyUsed
	}
	// The gate would take a use; the database then refuses an orderId it has already.
	return s.fromRow(ctx, req, grant)
}

// fromRow answers from the order's redemption if it has one (as a retry is answered), else grant.
func (s *Service) fromRow(ctx context.Context, req Request, grant Redemption) (Redemption, error) {
	r, err := s.store.Redemption(ctx, req.OrderID)
	switch {
	case err == nil:
		return answerRetry(req, r)
	case errors.Is(err, ErrReservationNotFound):
		return grant, nil
	}
	return Redemption{}, s.unavailable(err, "validate %s: read order", req.Code)
}

// closed answers a request the voucher refuses for why (Voucher.Refusal: paused, not open at
// now, an order below its minimum): a granted order keeps its answer while the voucher is
// paused, after it ended, and after an edit postponed its start; any other gets why. Before the
// start of a voucher never opened no order can exist, so the crowd waiting for its opening
// costs no lookup, however often the voucher was edited meanwhile.
func (s *Service) closed(ctx context.Context, v Voucher, req Request, now time.Time, why error) (Redemption, error) {
	if !now.Before(v.StartsAt) || v.Opened {
		if r, err := s.store.Redemption(ctx, req.OrderID); err == nil {
			return answerRetry(req, r)
		}
	}
	return Redemption{}, why
}
