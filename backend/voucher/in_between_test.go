package voucher_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"vouchergate/backend/voucher"
	"vouchergate/testkit"
)

// afterWrite is the real store with something done after a batch's write, before its answer
// goes back: what another process might do in between.
type afterWrite struct {
	voucher.Store
	then func(holds []voucher.Hold, out []voucher.Written, err error) ([]voucher.Written, error)
}

func (a afterWrite) ReserveMany(ctx context.Context, code string, holds []voucher.Hold) ([]voucher.Written, error) {
	out, err := a.Store.ReserveMany(ctx, code, holds)
	return a.then(holds, out, err)
}

// putBackHook is the real gate with something done just before a put-back.
type putBackHook struct {
	voucher.Gate
	before func(r voucher.Redemption)
}

func (p putBackHook) PutBack(ctx context.Context, r voucher.Redemption) (bool, error) {
	p.before(r)
	return p.Gate.PutBack(ctx, r)
}

// Redis loses a winner's take while its batch commits (a failover), so the writer puts the
// order back; the customer's release lands between the writer's read of the row and the
// put-back (the database first, then the gate, where nothing is held yet). The writer reads the
// row again after putting it back and gives the use back: no use stays held with no row.
func TestAPutBackForAnOrderReleasedMeanwhileIsGivenBack(t *testing.T) {
	var e *env
	var once sync.Once
	e = newEnvWith(t, voucher.Config{}, envOptions{
		wrapStore: func(st voucher.Store) voucher.Store {
			return afterWrite{Store: st, then: func(holds []voucher.Hold, out []voucher.Written, err error) ([]voucher.Written, error) {
				if _, _, rerr := e.gate.Release(context.Background(), holds[0].VoucherCode, holds[0].OrderID, nil); rerr != nil {
					t.Error(rerr) // Redis lost the take
				}
				return out, err
			}}
		},
		wrapGate: func(g voucher.Gate) voucher.Gate {
			return putBackHook{Gate: g, before: func(r voucher.Redemption) {
				once.Do(func() {
					if _, err := e.svc.Release(context.Background(), r.VoucherCode, r.OrderID); err != nil {
						t.Error(err)
					}
				})
			}}
		},
	})
	ctx := context.Background()
	v := e.createFlash(t, "PUTBACK", 2, 1)
	if err := e.svc.Warm(ctx, v.Code); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Reserve(ctx, request(v.Code, "c-1", "o-1")); err != nil {
		t.Fatal(err)
	}
	if r, err := e.store.Redemption(ctx, "o-1"); err != nil || r.Status != "RELEASED" {
		t.Fatalf("o-1: %+v %v; want it released by the customer", r, err)
	}
	checkHeldAsWritten(t, e, v.Code)
}

// Redis lost a granted order's take, and the reconciler puts the order back from the rows it
// read; the customer's release lands between that read and the put-back (the database first,
// then the gate, where nothing is held yet). The reconciler reads the row again after putting
// it back and gives the use back: no use stays held with no row until the next pass.
func TestAReconcilerPutBackForAnOrderReleasedMeanwhileIsGivenBack(t *testing.T) {
	var e *env
	var armed atomic.Bool
	e = newEnvWith(t, voucher.Config{}, envOptions{
		wrapGate: func(g voucher.Gate) voucher.Gate {
			return putBackHook{Gate: g, before: func(r voucher.Redemption) {
				if armed.CompareAndSwap(true, false) {
					if _, err := e.svc.Release(context.Background(), r.VoucherCode, r.OrderID); err != nil {
						t.Error(err)
					}
				}
			}}
		},
	})
	ctx := context.Background()
	v := e.createFlash(t, "RECPUT", 2, 1)
	if _, err := e.svc.Reserve(ctx, request(v.Code, "c-1", "o-1")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.gate.Release(ctx, v.Code, "o-1", nil); err != nil { // Redis lost the take
		t.Fatal(err)
	}
	armed.Store(true)
	rep, err := e.svc.Reconcile(ctx, v.Code, voucher.ReconcileConfig{Grace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if armed.Load() || len(rep.PutBack) != 1 {
		t.Fatalf("reconciliation put back %v; want o-1, released meanwhile", rep.PutBack)
	}
	if r, err := e.store.Redemption(ctx, "o-1"); err != nil || r.Status != "RELEASED" {
		t.Fatalf("o-1: %+v %v; want it released by the customer", r, err)
	}
	checkHeldAsWritten(t, e, v.Code)
}

// A batch's commit outcome is unknown to the writer (the connection broke at COMMIT) although
// it committed, and meanwhile the gate lost the order (another backend's retry, or the
// reconciler, took the hold with no row for hanging). The winner read back from its row is
// answered 201 only once the gate holds it again.
func TestAWinnerReadBackAfterAnUnknownOutcomeIsHeldInRedis(t *testing.T) {
	var e *env
	e = newEnvWith(t, voucher.Config{}, envOptions{
		wrapStore: func(st voucher.Store) voucher.Store {
			return afterWrite{Store: st, then: func(holds []voucher.Hold, out []voucher.Written, err error) ([]voucher.Written, error) {
				if err != nil || out[0].Err != nil {
					t.Errorf("the write itself: %v %v", err, out)
				}
				if _, _, rerr := e.gate.Release(context.Background(), holds[0].VoucherCode, holds[0].OrderID, nil); rerr != nil {
					t.Error(rerr)
				}
				return nil, errCut
			}}
		},
	})
	ctx := context.Background()
	v := e.createFlash(t, "READBACK", 2, 1)
	if err := e.svc.Warm(ctx, v.Code); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Reserve(ctx, request(v.Code, "c-1", "o-1")); err != nil {
		t.Fatalf("the committed winner: %v; want it answered from its row", err)
	}
	checkHeldAsWritten(t, e, v.Code)
}

// missingFails is the real gate whose check that written orders are held fails while failing
// is set, as with Redis unreachable for a moment.
type missingFails struct {
	voucher.Gate
	failing *atomic.Bool
}

func (g missingFails) Missing(ctx context.Context, code string, rs []voucher.Redemption) ([]voucher.Redemption, error) {
	if g.failing.CompareAndSwap(true, false) {
		return nil, errors.New("redis unreachable")
	}
	return g.Gate.Missing(ctx, code, rs)
}

// As above, a winner's commit outcome is unknown although it committed, and the gate lost its
// order meanwhile; this time the check that Redis holds it fails too. The row is committed, so
// the winner is still answered 201 (D4), and the order is left to the reconciler to put back.
// Until then the gate is suspect: the voucher sold out in Redis (a hold of another order whose
// attempt died took the use the lost order left), the winner's retry is answered from its row,
// not OUT_OF_STOCK.
func TestAWinnerReadBackWhoseRedisCheckFailedIsGrantedAgainOnRetry(t *testing.T) {
	var e *env
	var failing atomic.Bool
	e = newEnvWith(t, voucher.Config{}, envOptions{
		wrapStore: func(st voucher.Store) voucher.Store {
			return afterWrite{Store: st, then: func(holds []voucher.Hold, out []voucher.Written, err error) ([]voucher.Written, error) {
				if holds[0].OrderID != "o-1" {
					return out, err
				}
				if err != nil || out[0].Err != nil {
					t.Errorf("the write itself: %v %v", err, out)
				}
				if _, _, rerr := e.gate.Release(context.Background(), holds[0].VoucherCode, holds[0].OrderID, nil); rerr != nil {
					t.Error(rerr)
				}
				failing.Store(true)
				return nil, errCut
			}}
		},
		wrapGate: func(g voucher.Gate) voucher.Gate { return missingFails{Gate: g, failing: &failing} },
	})
	ctx := context.Background()
	v := e.createFlash(t, "UNCHECKED", 1, 1)
	if err := e.svc.Warm(ctx, v.Code); err != nil {
		t.Fatal(err)
	}
	first, err := e.svc.Reserve(ctx, request(v.Code, "c-1", "o-1"))
	if err != nil {
		t.Fatalf("the committed winner: %v; want it answered from its row", err)
	}
	if failing.Load() {
		t.Fatal("the winner's check in redis was never made")
	}
	if _, held, err := e.gate.Holding(ctx, v.Code, "o-1"); err != nil || held {
		t.Fatalf("o-1 held in redis: %v %v; want it lost, its check failed", held, err)
	}
	dead := voucher.Holder{CustomerID: "c-2", ReservedAt: e.clock.Now(), Attempt: "dead"}
	if res, err := e.gate.Reserve(ctx, v, "o-2", dead); err != nil || res.Outcome != voucher.GateReserved {
		t.Fatalf("another order's take: %+v %v", res, err)
	}
	if remaining, _, err := e.gate.Remaining(ctx, v.Code); err != nil || remaining != 0 {
		t.Fatalf("redis has %d uses left (%v); want it sold out", remaining, err)
	}
	again, err := e.svc.Reserve(ctx, request(v.Code, "c-1", "o-1"))
	if err != nil || again.DiscountAmount != first.DiscountAmount || again.CustomerID != "c-1" {
		t.Errorf("retry of the granted o-1 with redis sold out: %+v %v; want the same 201", again, err)
	}
	if _, err := e.svc.Reconcile(ctx, v.Code, voucher.ReconcileConfig{}); err != nil { // o-2's hold is hanging
		t.Fatal(err)
	}
	checkHeldAsWritten(t, e, v.Code)
}

// A reservation's request ends while its script waits in Redis (here a Redis of the test's own,
// paused for writes): the script still runs and takes a use. The gate call waits for it once
// sent, so the use is given back at once, as for any write not sent, instead of hanging until
// reconciliation.
func TestARequestThatEndsWhileItsScriptWaitsLeavesNoUseHeld(t *testing.T) {
	srv := testkit.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 5 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	e := newEnvWith(t, voucher.Config{}, envOptions{rdb: rdb})
	ctx := context.Background()
	v := e.createFlash(t, "PAUSED", 3, 1)
	if err := e.svc.Warm(ctx, v.Code); err != nil {
		t.Fatal(err)
	}

	// a first reservation loads the script, so that the paused call runs it rather than meet NOSCRIPT
	if _, err := e.svc.Reserve(ctx, request(v.Code, "c-0", "o-0")); err != nil {
		t.Fatal(err)
	}
	const pause = 800 * time.Millisecond
	paused := time.Now()
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := e.svc.Reserve(short, request(v.Code, "c-1", "o-1")); !errors.Is(err, voucher.ErrUnavailable) {
		t.Errorf("a request that ended while Redis was paused: %v; want ErrUnavailable", err)
	}
	time.Sleep(time.Until(paused.Add(pause + 300*time.Millisecond))) // the paused script has run
	if h, held, err := e.gate.Holding(ctx, v.Code, "o-1"); err != nil || held {
		t.Errorf("o-1 is held by %+v (%v) with no row and no one to give it back", h, err)
	}
	checkHeldAsWritten(t, e, v.Code)
}

// blockedWrites is the real store whose batches wait until the test lets them go.
type blockedWrites struct {
	voucher.Store
	started chan struct{}
	release chan struct{}
}

func (b blockedWrites) ReserveMany(ctx context.Context, code string, holds []voucher.Hold) ([]voucher.Written, error) {
	b.started <- struct{}{}
	<-b.release
	return b.Store.ReserveMany(context.Background(), code, holds)
}

// Backend B's clock is a second behind A's. B takes a use and its write is still in flight when
// the customer's retry reaches A: A reads B's hold as a second older than it is, yet within
// VG_MAX_CLOCK_SKEW it does not take it for stale and give it back under B's write; it answers
// 503 until B's write is done.
func TestARetryOnABackendWhoseClockIsAheadDoesNotTakeAHoldInFlight(t *testing.T) {
	cfg := voucher.Config{DBTimeout: 300 * time.Millisecond, InFlightWait: 300 * time.Millisecond, MaxClockSkew: 2 * time.Second}
	e := newEnv(t, cfg, nil)
	ctx := context.Background()
	v := e.createFlash(t, "SKEW", 5, 1)
	if err := e.svc.Warm(ctx, v.Code); err != nil {
		t.Fatal(err)
	}
	behind := &testkit.OffsetClock{}
	behind.Advance(-time.Second)
	blocked := blockedWrites{Store: e.store, started: make(chan struct{}, 1), release: make(chan struct{})}
	bcfg := cfg
	bcfg.Clock = behind
	b := voucher.NewService(blocked, e.gate, &recorder{}, bcfg)

	type answer struct {
		r   voucher.Redemption
		err error
	}
	fromB := make(chan answer, 1)
	go func() {
		r, err := b.Reserve(ctx, request(v.Code, "c-1", "o-1"))
		fromB <- answer{r, err}
	}()
	<-blocked.started
	first, held, err := e.gate.Holding(ctx, v.Code, "o-1")
	if err != nil || !held {
		t.Fatalf("B's hold: %v %v", held, err)
	}
	if _, err := e.svc.Reserve(ctx, request(v.Code, "c-1", "o-1")); !errors.Is(err, voucher.ErrUnavailable) {
		t.Errorf("A's retry while B's write is in flight: %v; want ErrUnavailable", err)
	}
	if now, held, err := e.gate.Holding(ctx, v.Code, "o-1"); err != nil || !held || now.Attempt != first.Attempt {
		t.Errorf("after A's retry o-1 is held by %+v (%v, %v); want B's attempt %s still", now, held, err, first.Attempt)
	}
	close(blocked.release)
	if a := <-fromB; a.err != nil {
		t.Fatalf("B's reservation: %v", a.err)
	}
	if _, err := e.svc.Reserve(ctx, request(v.Code, "c-1", "o-1")); err != nil {
		t.Errorf("A's retry once B's write is done: %v", err)
	}
	checkHeldAsWritten(t, e, v.Code)
}

// The compensation's release script ran once but its reply never reached the backend, and the
// release is sent again: the second send finds nothing held. That is not counted as a use given
// back, and since the first send made the sold-out voucher available, the edges are told so.
func TestACompensationSentTwiceCountsNothingAndTellsBackInStock(t *testing.T) {
	reg := prometheus.NewRegistry()
	var e *env
	e = newEnvWith(t, voucher.Config{Metrics: reg}, envOptions{
		wrapStore: func(st voucher.Store) voucher.Store {
			return refusedWrites{Store: st, then: func(h voucher.Hold) {
				// the failed write's compensation: its first send, whose reply is lost
				if _, _, err := e.gate.Release(context.Background(), h.VoucherCode, h.OrderID, nil); err != nil {
					t.Error(err)
				}
			}}
		},
	})
	ctx := context.Background()
	v := e.createFlash(t, "RESENT", 1, 1)
	if err := e.svc.Warm(ctx, v.Code); err != nil {
		t.Fatal(err)
	}
	seen := e.note.count()
	if _, err := e.svc.Reserve(ctx, request(v.Code, "c-1", "o-1")); !errors.Is(err, voucher.ErrUnavailable) {
		t.Fatalf("the refused write: %v; want ErrUnavailable", err)
	}
	if n := counterValue(t, reg, "vouchergate_compensations_total", "released"); n != 0 {
		t.Errorf("compensations_total{released} = %v after a release that found nothing; want 0", n)
	}
	if n := counterValue(t, reg, "vouchergate_compensations_total", "nothing_held"); n != 1 {
		t.Errorf("compensations_total{nothing_held} = %v; want 1", n)
	}
	if got := e.note.since(seen); !contains(got, "back in stock "+v.Code) {
		t.Errorf("notices %v; want back in stock: the sold-out voucher has its use again", got)
	}
	checkHeldAsWritten(t, e, v.Code)
}

// refusedWrites is the real store whose batches the server refuses (nothing written), each
// after then ran for its first hold.
type refusedWrites struct {
	voucher.Store
	then func(voucher.Hold)
}

func (r refusedWrites) ReserveMany(_ context.Context, _ string, holds []voucher.Hold) ([]voucher.Written, error) {
	r.then(holds[0])
	return nil, errRefused
}

// counterValue reads a counter with one label's value from reg (0 when it has none).
func counterValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// An order reserved, released, then sent again: the gate takes a use for it (Redis no longer
// holds the order), the database answers that the order was released, and the use goes back.
// The answer is RESERVATION_RELEASED; that is no failed write, so no compensation is counted
// or logged, and Redis holds nothing for it.
func TestAReleasedOrderSentAgainIsNoCompensation(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	e := newEnv(t, voucher.Config{Metrics: reg, Log: slog.New(slog.NewTextHandler(&logs, nil))}, nil)
	ctx := context.Background()
	v := e.createFlash(t, "RESENT2", 2, 1)
	if _, err := e.svc.Reserve(ctx, request(v.Code, "c-1", "rel-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Release(ctx, v.Code, "rel-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Reserve(ctx, request(v.Code, "c-1", "rel-1")); !errors.Is(err, voucher.ErrReleased) {
		t.Fatalf("the released order sent again: %v; want ErrReleased", err)
	}
	for _, result := range []string{"released", "nothing_held", "failed"} {
		if n := counterValue(t, reg, "vouchergate_compensations_total", result); n != 0 {
			t.Errorf("compensations_total{%s} = %v; want 0", result, n)
		}
	}
	if strings.Contains(logs.String(), "given back in redis after its write failed") {
		t.Errorf("logged a compensation:\n%s", logs.String())
	}
	checkHeldAsWritten(t, e, v.Code)
}

// heldWrites is blockedWrites until free, then the real store.
type heldWrites struct {
	blockedWrites
	free atomic.Bool
}

func (h *heldWrites) ReserveMany(ctx context.Context, code string, holds []voucher.Hold) ([]voucher.Written, error) {
	if h.free.Load() {
		return h.Store.ReserveMany(ctx, code, holds)
	}
	return h.blockedWrites.ReserveMany(ctx, code, holds)
}

// Redis restarts empty while customer A's write of order o-x is in flight; the load that
// follows reads the database before A commits, and customer B then takes o-x in the gate (a
// client reusing an orderId). A's batch commits: its check after the commit finds o-x held, but
// by B, whose write the database must refuse (one redemption per orderId). The check must make
// the gate's entry A's: otherwise A's retry is refused as another customer's order, and B's
// refusal gives back the use A's row holds.
func TestACommittedOrderHeldInRedisByAnotherCustomerBecomesItsOwn(t *testing.T) {
	bw := &heldWrites{blockedWrites: blockedWrites{started: make(chan struct{}), release: make(chan struct{})}}
	e := newEnv(t, voucher.Config{DBTimeout: 5 * time.Second, InFlightWait: 3 * time.Second}, func(st voucher.Store) voucher.Store {
		bw.Store = st
		return bw
	})
	ctx := context.Background()
	v := e.createFlash(t, "TAKEN", 3, 1)
	if err := e.svc.Warm(ctx, v.Code); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		r   voucher.Redemption
		err error
	}
	reserve := func(customer string) chan answer {
		c := make(chan answer, 1)
		go func() {
			r, err := e.svc.Reserve(ctx, request(v.Code, customer, "o-x"))
			c <- answer{r, err}
		}()
		return c
	}

	a := reserve("c-a")
	<-bw.started // A's batch waits
	if _, err := e.gate.Forget(ctx, v.Code); err != nil {
		t.Fatal(err)
	}
	b := reserve("c-b") // loads the voucher without o-x, then takes o-x
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if h, held, err := e.gate.Holding(ctx, v.Code, "o-x"); err == nil && held && h.CustomerID == "c-b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B's take of o-x never reached redis")
		}
	}
	bw.release <- struct{}{} // A's batch commits
	<-bw.started             // B's batch waits
	first := <-a
	if first.err != nil {
		t.Fatalf("A: %v; want 201", first.err)
	}
	if r, err := e.svc.Reserve(ctx, request(v.Code, "c-a", "o-x")); err != nil || r.DiscountAmount != first.r.DiscountAmount || r.CustomerID != "c-a" {
		t.Errorf("A's retry while B's write waits: %+v %v; want the same 201", r, err)
	}
	bw.release <- struct{}{} // B's batch: refused
	bw.free.Store(true)
	if second := <-b; !errors.Is(second.err, voucher.ErrAlreadyUsed) {
		t.Errorf("B: %+v %v; want ErrAlreadyUsed", second.r, second.err)
	}
	checkHeldAsWritten(t, e, v.Code)
	if r, err := e.svc.Reserve(ctx, request(v.Code, "c-a", "o-x")); err != nil || r.DiscountAmount != first.r.DiscountAmount || r.CustomerID != "c-a" {
		t.Errorf("A's retry after B's refusal: %+v %v; want the same 201", r, err)
	}
}
