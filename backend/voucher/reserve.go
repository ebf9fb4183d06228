package voucher

import (
	"context"
	"errors"
	"fmt"

	"vouchergate/shared/wire"
)

// Request is a reservation as the client asked for it.
type Request struct {
	Code        string
	CustomerID  string
	OrderID     string
	OrderAmount int64
}

// Reserve takes one use of the voucher for the order, or answers a retry of the same order as
// it was answered before. It never takes a second use for an orderId.
//
// It decides with this backend's copy of the voucher, which the path checks against the
// voucher's revision where the use is taken (the flash gate's definition, the normal path's
// lookup): a copy older than an edit is read again and the reservation decided anew with it,
// so no reservation decided after an edit committed uses the definition before it.
func (s *Service) Reserve(ctx context.Context, req Request) (Redemption, error) {
	if !s.enter() {
		return Redemption{}, errClosed("reserve " + req.Code)
	}
	defer s.leave()
	for try := 1; ; try++ {
		v, err := s.voucher(ctx, req.Code)
		if err != nil {
			return Redemption{}, s.unavailable(err, "reserve %s: read voucher", req.Code)
		}
		r, err := s.reserveAs(ctx, v, req, try)
		if !errors.Is(err, errRevised) {
			return r, err
		}
		if try == revisedTries {
			return Redemption{}, fmt.Errorf("reserve %s: the voucher changed %d times while deciding: %w", req.Code, try, ErrUnavailable)
		}
	}
}

// errRevised says the voucher changed under a reservation, which is decided again with the
// voucher as it is now; revisedTries bounds how often.
var errRevised = errors.New("voucher revised meanwhile")

const revisedTries = 6

// reserveAs decides the reservation with v, the try-th copy of the voucher it was given.
func (s *Service) reserveAs(ctx context.Context, v Voucher, req Request, try int) (Redemption, error) {
	now := s.cfg.Clock.Now()
	if why := v.Refusal(now, req.OrderAmount); why != nil {
		return s.closed(ctx, v, req, now, why)
	}
	h := Hold{
		VoucherCode:    v.Code,
		CustomerID:     req.CustomerID,
		OrderID:        req.OrderID,
		OrderAmount:    req.OrderAmount,
		DiscountAmount: v.Discount(req.OrderAmount),
		ReservedAt:     now,
		ExpiresAt:      now.Add(v.holdTTL(s.cfg.HoldTTL)),
	}
	if v.FlashSale {
		return s.reserveFlash(ctx, v, h, try)
	}
	return s.reserveInDB(ctx, v, h)
}

// reserveInDB is the normal voucher's path: a lookup without locks answers retries and the
// sold-out crowd; the others go to the voucher's writer, which writes them with those that
// arrive meanwhile in one guarded transaction (group commit) and answers each as
// Store.Reserve would.
func (s *Service) reserveInDB(ctx context.Context, v Voucher, h Hold) (Redemption, error) {
	req := h.request()
	seen, err := s.store.Lookup(ctx, h.VoucherCode, h.OrderID)
	switch {
	case err != nil:
		return Redemption{}, s.unavailable(err, "reserve %s: look up order", h.VoucherCode)
	case seen.Existing != nil:
		return answerRetry(req, *seen.Existing)
	case seen.Revision > v.Revision:
		// an edit committed since this copy was read: decide with the voucher as it is
		if _, err := s.freshVoucher(ctx, v.Code); err != nil {
			return Redemption{}, s.unavailable(err, "reserve %s: read voucher again", v.Code)
		}
		return Redemption{}, errRevised
	case seen.SoldOut:
		return Redemption{}, ErrOutOfStock // the late crowd never queues for the voucher's row lock
	}
	r, err := s.writerFor(v).write(ctx, h)
	switch {
	case err == nil:
		return r, nil
	case errors.Is(err, ErrOrderExists) || errors.Is(err, ErrOutOfStock) || errors.Is(err, ErrAlreadyUsed):
		// A concurrent attempt with the same orderId may have committed first, taking the last
		// use or the customer's last slot: then this attempt answers as that one did.
		existing, rerr := s.store.Redemption(ctx, h.OrderID)
		if rerr == nil {
			return answerRetry(req, existing)
		}
		if errors.Is(err, ErrOrderExists) || !errors.Is(rerr, ErrReservationNotFound) {
			return Redemption{}, s.unavailable(rerr, "reserve %s: read existing order", h.VoucherCode)
		}
		return Redemption{}, err
	default:
		return Redemption{}, s.unavailable(err, "reserve %s", h.VoucherCode)
	}
}

// answerRetry answers a request whose orderId already has redemption r: the same grant for the
// same voucher and customer while it holds its use; a refusal otherwise.
func answerRetry(req Request, r Redemption) (Redemption, error) {
	switch {
	case r.VoucherCode != req.Code || r.CustomerID != req.CustomerID:
		return Redemption{}, fmt.Errorf("order %s belongs to another reservation: %w", wire.ClientOrderID(req.OrderID), ErrAlreadyUsed)
	case r.Status == wire.StatusReleased:
		return Redemption{}, ErrReleased
	case r.Status == wire.StatusRefunded:
		return Redemption{}, ErrRefunded
	}
	return r, nil
}

func (h Hold) request() Request {
	return Request{Code: h.VoucherCode, CustomerID: h.CustomerID, OrderID: h.OrderID, OrderAmount: h.OrderAmount}
}

// unavailable passes domain outcomes through and turns anything else into ErrUnavailable,
// keeping what was being done and the cause.
func (s *Service) unavailable(err error, format string, args ...any) error {
	if isDomain(err) {
		return err
	}
	return fmt.Errorf("%s: %w: %w", fmt.Sprintf(format, args...), ErrUnavailable, err)
}
