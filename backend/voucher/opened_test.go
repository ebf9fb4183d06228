package voucher_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/backend/voucher"
)

// Before its start a voucher never opened can hold no order, so the crowd waiting for its
// opening is refused NOT_STARTED without an order lookup, however often the voucher was edited
// meanwhile (a raised limit, a pause and a resume). Once an edit found it open, its start moved
// later, a granted order's retry is still answered from its row, on both paths.
func TestTheCrowdBeforeAnOpeningCostsNoLookup(t *testing.T) {
	reads := &countedReads{}
	e := newEnvWith(t, voucher.Config{}, envOptions{wrapStore: func(st voucher.Store) voucher.Store { reads.Store = st; return reads }})
	ctx := context.Background()
	for _, flash := range []bool{true, false} {
		code := map[bool]string{true: "EARLY-FLASH", false: "EARLY-NORMAL"}[flash]
		now := e.clock.Now()
		v := voucher.Voucher{Code: code, DiscountAmount: 10, TotalLimit: 10, PerUserLimit: 1,
			StartsAt: now.Add(time.Hour), EndsAt: now.Add(24 * time.Hour), FlashSale: flash}
		if err := e.store.CreateVoucher(ctx, v); err != nil {
			t.Fatal(err)
		}
		if flash {
			if err := e.svc.Warm(ctx, code); err != nil {
				t.Fatal(err)
			}
		}
		edit := func(what string, ed voucher.Edit) {
			t.Helper()
			if _, err := e.svc.Edit(ctx, code, ed); err != nil {
				t.Fatalf("%s: edit (%s): %v", code, what, err)
			}
		}
		raised, paused, resumed := 20, false, true
		edit("raise the limit", voucher.Edit{TotalLimit: &raised})
		edit("pause", voucher.Edit{Active: &paused})
		edit("resume", voucher.Edit{Active: &resumed})
		before := reads.n.Load()
		if _, err := e.svc.Reserve(ctx, request(code, "c-early", code+"-early")); !errors.Is(err, voucher.ErrNotStarted) {
			t.Fatalf("%s: an order before the opening: %v; want NOT_STARTED", code, err)
		}
		if n := reads.n.Load() - before; n != 0 {
			t.Errorf("%s: an order before the opening of a voucher edited but never opened read %d orders; want none", code, n)
		}

		opened, postponed := now.Add(-time.Minute), now.Add(time.Hour)
		edit("open it", voucher.Edit{StartsAt: &opened})
		granted, err := e.svc.Reserve(ctx, request(code, "c-1", code+"-1"))
		if err != nil {
			t.Fatalf("%s: an order while open: %v", code, err)
		}
		edit("postpone its start", voucher.Edit{StartsAt: &postponed})
		again, err := e.svc.Reserve(ctx, request(code, "c-1", code+"-1"))
		if err != nil || again.DiscountAmount != granted.DiscountAmount {
			t.Errorf("%s: the granted order's retry after its start was postponed: %+v %v; want its 201", code, again, err)
		}
		if _, err := e.svc.Reserve(ctx, request(code, "c-2", code+"-2")); !errors.Is(err, voucher.ErrNotStarted) {
			t.Errorf("%s: a new order after its start was postponed: %v; want NOT_STARTED", code, err)
		}
	}
}

// countedReads counts the store's reads of an order by its id.
type countedReads struct {
	voucher.Store
	n atomic.Int64
}

func (s *countedReads) Redemption(ctx context.Context, orderID string) (voucher.Redemption, error) {
	s.n.Add(1)
	return s.Store.Redemption(ctx, orderID)
}
