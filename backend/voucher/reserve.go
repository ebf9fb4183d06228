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
func (s *Service) Reserve(ctx context.Context, req Request) (Redemption, error) {
	if !s.enter() {
		return Redemption{}, errClosed("reserve " + req.Code)
	}
	defer s.leave()
	v, err := s.voucher(ctx, req.Code)
	if err != nil {
		return Redemption{}, s.unavailable(err, "reserve %s: read voucher", req.Code)
	}
	now := s.cfg.Clock.Now()
	if !v.Open(now) || req.OrderAmount < v.MinOrderAmount {
		return s.closed(ctx, v, req, now)
	}
	h := Hold{
		VoucherCode:    v.Code,
		CustomerID:     req.CustomerID,
		OrderID:        req.OrderID,
		OrderAmount:    req.OrderAmount,
		DiscountAmount: v.Discount(req.OrderAmount),
		ReservedAt:     now,
		ExpiresAt:      now.Add(s.cfg.HoldTTL),
	}
	if v.FlashSale {
		return s.reserveFlash(ctx, v, h)
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
