package voucher_test

import (
	"context"
	"testing"
	"time"

	"vouchergate/backend/voucher"
)

// A retry that finds a stale hold (its attempt died) gives the use back before taking one
// anew. If that use was the last, the voucher was sold out and is not any more: the edges must
// hear it, or they keep refusing a voucher that has a use (issue 9, item 5).
func TestStaleGiveBackAnnouncesBackInStock(t *testing.T) {
	e := newEnv(t, voucher.Config{DBTimeout: 200 * time.Millisecond, InFlightWait: 5 * time.Second}, nil)
	ctx := context.Background()
	v := e.createFlash(t, "STALE", 1, 1)
	if err := e.svc.Warm(ctx, v.Code); err != nil {
		t.Fatal(err)
	}
	// an attempt that took the last use and died before its write
	dead := voucher.Holder{CustomerID: "c1", ReservedAt: e.clock.Now(), Attempt: "dead"}
	if res, err := e.gate.Reserve(ctx, v, "o1", dead); err != nil || res.Outcome != voucher.GateReserved {
		t.Fatalf("take the last use: %+v %v", res, err)
	}
	e.clock.Advance(time.Second) // past 2×DBTimeout: no write of it can commit any more
	n := e.note.count()

	r, err := e.svc.Reserve(ctx, voucher.Request{Code: v.Code, CustomerID: "c1", OrderID: "o1", OrderAmount: 100})
	if err != nil || r.OrderID != "o1" {
		t.Fatalf("retry of the order: %+v %v", r, err)
	}
	told := e.note.since(n)
	if len(told) < 2 || told[0] != "back in stock STALE" || told[len(told)-1] != "sold out STALE" {
		t.Errorf("told the edges %q; want back in stock (the stale use came back), then sold out (the retry took it)", told)
	}
}

// Reconciliation recounts a voucher whose remaining count fell below what its holders leave: a
// voucher Redis called sold out has uses again, and the edges must hear it (issue 9, item 5).
func TestRecountOutOfSoldOutAnnouncesBackInStock(t *testing.T) {
	e := newEnv(t, voucher.Config{}, nil)
	ctx := context.Background()
	v := e.createFlash(t, "RECOUNT", 2, 1)
	if _, err := e.svc.Reserve(ctx, voucher.Request{Code: v.Code, CustomerID: "c1", OrderID: "o1", OrderAmount: 100}); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Set(ctx, e.keys(v.Code).Remaining, 0, 0).Err(); err != nil { // drifted: sold out
		t.Fatal(err)
	}
	n := e.note.count()
	rep, err := e.svc.Reconcile(ctx, v.Code, voucher.ReconcileConfig{Grace: time.Minute})
	if err != nil || rep.RemainingAfter != 1 {
		t.Fatalf("reconcile: %+v %v", rep, err)
	}
	if told := e.note.since(n); !contains(told, "back in stock RECOUNT") {
		t.Errorf("told the edges %q after the recount gave a use back; want back in stock", told)
	}
}
