package voucher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"vouchergate/backend/voucher"
)

// After a Redis failover lost a granted order's take, while a lost release still holds a use
// (the gate has none left for it), the order's retry is refused OUT_OF_STOCK by a trusted gate;
// once the backend saw a master go (SuspectGate) the refusal looks at the database and answers
// the order from its row, putting its hold back; a reconciliation of every voucher trusts the
// gate again, and a new order is refused as before.
func TestASuspectGatesRefusalLooksAtTheDatabase(t *testing.T) {
	e := newEnv(t, voucher.Config{}, nil)
	ctx := context.Background()
	v := e.createFlash(t, "SUSPECT", 2, 1)
	if err := e.svc.Warm(ctx, v.Code); err != nil {
		t.Fatal(err)
	}
	granted, err := e.svc.Reserve(ctx, request(v.Code, "c-1", "o-1"))
	if err != nil {
		t.Fatal(err)
	}
	k := e.keys(v.Code)
	// what a failover to a replica without the last writes leaves: o-1's take gone, and a
	// released order's use still held (remaining 0 for a voucher with one active row of two)
	if err := e.rdb.HDel(ctx, k.Orders, "o-1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HSet(ctx, k.Orders, "o-gone", "1:db:c-9").Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Set(ctx, k.Remaining, 0, 0).Err(); err != nil {
		t.Fatal(err)
	}

	if _, err := e.svc.Reserve(ctx, request(v.Code, "c-1", "o-1")); !errors.Is(err, voucher.ErrOutOfStock) {
		t.Fatalf("the retry with the gate trusted: %v; want the gate's OUT_OF_STOCK (what the suspicion is for)", err)
	}
	e.svc.SuspectGate()
	r, err := e.svc.Reserve(ctx, request(v.Code, "c-1", "o-1"))
	if err != nil || r.DiscountAmount != granted.DiscountAmount {
		t.Fatalf("the retry with the gate suspect: %+v, %v; want its grant, answered from its row", r, err)
	}
	if holder, held, err := e.gate.Holding(ctx, v.Code, "o-1"); err != nil || !held || holder.CustomerID != "c-1" {
		t.Errorf("o-1 in the gate after its retry: %+v %v %v; want held for c-1 again", holder, held, err)
	}
	if _, err := e.svc.Reserve(ctx, request(v.Code, "c-2", "o-2")); !errors.Is(err, voucher.ErrOutOfStock) {
		t.Errorf("a new order with the gate suspect and no use left: %v; want OUT_OF_STOCK", err)
	}

	if _, err := e.svc.ReconcileAll(ctx, voucher.ReconcileConfig{Grace: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	if r, err := e.svc.Reserve(ctx, request(v.Code, "c-2", "o-2")); err != nil {
		t.Errorf("a new order after the reconciliation released the lost release's use: %+v, %v; want granted", r, err)
	}
}
