package voucher_test

import (
	"context"
	"errors"
	"sync/atomic"
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

// resentRelease is the real gate whose next release of an order, once armed, runs twice, as a
// release whose reply was lost and which is sent again: the second send finds nothing held.
type resentRelease struct {
	voucher.Gate
	armed *atomic.Bool
}

func (g resentRelease) Release(ctx context.Context, code, orderID string, expect *voucher.Holder) (bool, int64, error) {
	if g.armed.CompareAndSwap(true, false) {
		if _, _, err := g.Gate.Release(ctx, code, orderID, expect); err != nil {
			return false, 0, err
		}
	}
	return g.Gate.Release(ctx, code, orderID, expect)
}

// A give-back whose first send took the sold-out voucher's last use back, but whose reply was
// lost, is sent again and finds nothing held. The edges heard nothing of the first send, so
// the give-back tells them the voucher is back in stock, whichever way the use went back: a
// re-sent order the database refused (a retry's give-back, no compensation), or a retry that
// took its order's hold for stale.
func TestAGiveBackSentTwiceTellsBackInStock(t *testing.T) {
	for _, c := range []struct {
		name    string
		prepare func(t *testing.T, e *env, v voucher.Voucher)
		want    error  // the answer to c-1's o-1
		last    string // the last notice
	}{
		{"re-sent released order", func(t *testing.T, e *env, v voucher.Voucher) {
			if _, err := e.svc.Reserve(context.Background(), request(v.Code, "c-1", "o-1")); err != nil {
				t.Fatal(err)
			}
			if _, err := e.svc.Release(context.Background(), v.Code, "o-1"); err != nil {
				t.Fatal(err)
			}
		}, voucher.ErrReleased, "back in stock"},
		{"stale hold", func(t *testing.T, e *env, v voucher.Voucher) {
			dead := voucher.Holder{CustomerID: "c-1", ReservedAt: e.clock.Now(), Attempt: "dead"}
			if res, err := e.gate.Reserve(context.Background(), v, "o-1", dead); err != nil || res.Outcome != voucher.GateReserved {
				t.Fatalf("take the last use: %+v %v", res, err)
			}
			e.clock.Advance(time.Second) // past 2×DBTimeout: no write of it can commit any more
		}, nil, "sold out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var armed atomic.Bool
			e := newEnvWith(t, voucher.Config{DBTimeout: 200 * time.Millisecond, InFlightWait: 5 * time.Second}, envOptions{
				wrapGate: func(g voucher.Gate) voucher.Gate { return resentRelease{Gate: g, armed: &armed} },
			})
			v := e.createFlash(t, "RESEND", 1, 1)
			if err := e.svc.Warm(context.Background(), v.Code); err != nil {
				t.Fatal(err)
			}
			c.prepare(t, e, v)
			n := e.note.count()
			armed.Store(true)
			if _, err := e.svc.Reserve(context.Background(), request(v.Code, "c-1", "o-1")); !errors.Is(err, c.want) {
				t.Fatalf("o-1: %v; want %v", err, c.want)
			}
			if armed.Load() {
				t.Fatal("no release was sent")
			}
			told := e.note.since(n)
			if !contains(told, "back in stock RESEND") || told[len(told)-1] != c.last+" RESEND" {
				t.Errorf("told the edges %q; want back in stock (the first send gave the last use back), %s last", told, c.last)
			}
			checkHeldAsWritten(t, e, v.Code)
		})
	}
}
