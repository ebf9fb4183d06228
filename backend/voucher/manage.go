package voucher

import (
	"context"
	"errors"
	"time"

	"vouchergate/shared/wire"
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

// Refund refunds a confirmed order and gives its use back: in the database (used_count, the
// customer's slot) in one transaction, then for a flash voucher in Redis, telling the edges when
// that makes a sold-out voucher available. The use comes back once however often the refund is
// sent, on whichever backend: the database moves the order out of CONFIRMED once, and the Redis
// step of a repeated refund changes nothing unless the order is still held. Errors:
// ErrNotConfirmed (a RESERVED order: release it), ErrReleased, ErrReservationNotFound,
// ErrVoucherNotFound, ErrUnavailable.
func (s *Service) Refund(ctx context.Context, code, orderID string) (Redemption, error) {
	if !s.enter() {
		return Redemption{}, errClosed("refund " + code + "/" + orderID)
	}
	defer s.leave()
	v, err := s.voucher(ctx, code)
	if err != nil {
		return Redemption{}, s.unavailable(err, "refund %s/%s: read voucher", code, orderID)
	}
	r, _, err := s.store.Refund(ctx, code, orderID, s.cfg.Clock.Now())
	if err != nil {
		return Redemption{}, s.unavailable(err, "refund %s/%s", code, orderID)
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

// StoredOrder returns how the order the caller names is stored: orderID as a client sent it,
// for owner, the customer the caller acts for ("" for a service acting for anyone). What it
// returns for an order that does not exist is one no redemption has, so that Confirm and
// Release then answer as for any missing order (ErrReservationNotFound, ErrVoucherNotFound).
//
//   - For an owner: the owner's own order (a shopper's is stored in its scope,
//     wire.ShopperOrderID), or else a service's order of that orderId that is the owner's.
//     Another customer's order is never returned: to the owner it is no order at all.
//   - For a service: the service's order of that orderId, or else the shopper's order of it:
//     the one active, or the one at all; ErrOrderAmbiguous when several shoppers hold it, or
//     held it and none holds it now (the caller names the customer).
func (s *Service) StoredOrder(ctx context.Context, code, orderID, owner string) (string, error) {
	if owner != "" {
		scoped := wire.ShopperOrderID(owner, orderID)
		if _, err := s.Redemption(ctx, code, scoped); !errors.Is(err, ErrReservationNotFound) {
			return scoped, err
		}
		if r, err := s.Redemption(ctx, code, orderID); err != nil || r.CustomerID != owner {
			return scoped, ignoreNotFound(err)
		}
		return orderID, nil
	}
	if _, err := s.Redemption(ctx, code, orderID); !errors.Is(err, ErrReservationNotFound) {
		return orderID, err
	}
	found, err := s.store.ShopperOrders(ctx, code, orderID, 2)
	switch {
	case err != nil:
		return "", s.unavailable(err, "find shoppers' orders %s/%s", code, orderID)
	case len(found) == 0:
		return orderID, nil
	case len(found) > 1 && (found[1].Active() || !found[0].Active()):
		return "", ErrOrderAmbiguous
	}
	return found[0].OrderID, nil
}

// ignoreNotFound is err, or nil for ErrReservationNotFound.
func ignoreNotFound(err error) error {
	if errors.Is(err, ErrReservationNotFound) {
		return nil
	}
	return err
}
