package voucher_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
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

// A failed check that one voucher's committed orders are held makes that voucher suspect, not
// the gate: another sold-out voucher's refusals stay the gate's alone, with no database lookup,
// and the voucher's own reconciliation trusts it again.
func TestAFailedHeldCheckMakesOnlyItsVoucherSuspect(t *testing.T) {
	var failing atomic.Bool
	lookups := &countedLookups{}
	e := newEnvWith(t, voucher.Config{}, envOptions{
		wrapStore: func(st voucher.Store) voucher.Store { lookups.Store = st; return lookups },
		wrapGate:  func(g voucher.Gate) voucher.Gate { return missingFails{Gate: g, failing: &failing} },
	})
	ctx := context.Background()
	checked, other := e.createFlash(t, "CHECKED", 1, 1), e.createFlash(t, "OTHER", 1, 1)
	for _, code := range []string{checked.Code, other.Code} {
		if err := e.svc.Warm(ctx, code); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.svc.Reserve(ctx, request(other.Code, "c-1", "o-1")); err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	if _, err := e.svc.Reserve(ctx, request(checked.Code, "c-1", "k-1")); err != nil {
		t.Fatalf("the winner whose check in redis fails: %v; want its 201 (its row is committed)", err)
	}
	if failing.Load() {
		t.Fatal("the winner's check in redis was never made")
	}
	refused := func(code, order string) int64 {
		t.Helper()
		before := lookups.of(code)
		if _, err := e.svc.Reserve(ctx, request(code, "c-new-"+order, order)); !errors.Is(err, voucher.ErrOutOfStock) {
			t.Fatalf("a new order of sold-out %s: %v; want OUT_OF_STOCK", code, err)
		}
		return lookups.of(code) - before
	}
	if n := refused(other.Code, "o-2"); n != 0 {
		t.Errorf("a refusal of %s after %s's check failed looked at the database %d times; want none (only %s is suspect)", other.Code, checked.Code, n, checked.Code)
	}
	if n := refused(checked.Code, "k-2"); n == 0 {
		t.Errorf("a refusal of %s, whose check failed, did not look at the database", checked.Code)
	}
	if _, err := e.svc.Reconcile(ctx, checked.Code, voucher.ReconcileConfig{}); err != nil {
		t.Fatal(err)
	}
	if n := refused(checked.Code, "k-3"); n != 0 {
		t.Errorf("a refusal of %s after its reconciliation looked at the database %d times; want none", checked.Code, n)
	}
}

// countedLookups counts the store's order lookups by voucher.
type countedLookups struct {
	voucher.Store
	n sync.Map // code -> *atomic.Int64
}

func (s *countedLookups) Lookup(ctx context.Context, code, orderID string) (voucher.Lookup, error) {
	c, _ := s.n.LoadOrStore(code, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
	return s.Store.Lookup(ctx, code, orderID)
}

func (s *countedLookups) of(code string) int64 {
	if c, ok := s.n.Load(code); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}
