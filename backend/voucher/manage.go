package voucher

import (
	"context"
	"time"
)

// Confirm confirms the order's reservation; confirming again answers the same.
func (s *Service) Confirm(ctx context.Context, code, orderID string) (Redemption, error) {
	r, err := s.store.Confirm(ctx, code, orderID, s.cfg.Clock.Now())
	if err != nil {
		return Redemption{}, s.unavailable(err, "confirm %s/%s", code, orderID)
	}
	return r, nil
}

// Release releases the order's reservation and gives its use back; releasing again answers the
// same. For a flash voucher the use goes back to Redis after the database committed; a repeated
// release repeats that step, which only an order still held in Redis changes.
func (s *Service) Release(ctx context.Context, code, orderID string) (Redemption, error) {
	if !s.enter() {
		return Redemption{}, errClosed("release " + code + "/" + orderID)
	}
	defer s.leave()
	v, err := s.voucher(ctx, code)
	if err != nil {
		return Redemption{}, s.unavailable(err, "release %s/%s: read voucher", code, orderID)
	}
	r, _, err := s.store.Release(ctx, code, orderID, s.cfg.Clock.Now())
	if err != nil {
		return Redemption{}, s.unavailable(err, "release %s/%s", code, orderID)
	}
	if v.FlashSale && s.gate != nil {
		s.ReleaseInGate(code, orderID)
	}
	return r, nil
}

// ReleaseInGate gives back in Redis the use of an order the database has released, and tells
// the edges when that makes a sold-out voucher available. A failure is logged: the reconciler
// releases what stays held.
func (s *Service) ReleaseInGate(code, orderID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.giveBack(ctx, code, orderID, nil); err != nil {
		s.cfg.Log.Warn("release in redis failed; the reconciler will release it", "code", code, "order", orderID, "err", err)
	}
}

// Redemption reads the order's redemption of the voucher code, as it stands: who holds it and
// in which status. ErrReservationNotFound when the order has none of this voucher.
func (s *Service) Redemption(ctx context.Context, code, orderID string) (Redemption, error) {
	r, err := s.store.Redemption(ctx, orderID)
	if err == nil && r.VoucherCode != code {
		err = ErrReservationNotFound
	}
	if err != nil {
		return Redemption{}, s.unavailable(err, "read redemption %s/%s", code, orderID)
	}
	return r, nil
}
