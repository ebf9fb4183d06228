package voucher_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/backend/voucher"
)

// A flash winner whose write fails gets its use back in the gate exactly when the database
// certainly did not take it; when the outcome is unknown (or cannot be read back) the use stays
// held for the reconciler: under-allocation, never a use sold twice.
func TestFlashWriteFailureCompensatesOnlyWhatWasNotWritten(t *testing.T) {
	cases := []struct {
		name      string
		total     int
		before    func(t *testing.T, f *fakeEnv)
		want      error
		held      bool  // o1 still holds a use in the gate
		remaining int64 // the gate's uses left at the end
		row       bool  // o1 has an active row of F
		granted   []string
		told      []string
	}{
		{name: "write certainly not written: given back", total: 2, remaining: 2, want: voucher.ErrUnavailable,
			before: func(t *testing.T, f *fakeEnv) { f.store.arm("ReserveMany", fault{err: errRefused}) }},
		{name: "last use not written: given back, back in stock told", total: 1, remaining: 1, want: voucher.ErrUnavailable,
			before: func(t *testing.T, f *fakeEnv) { f.store.arm("ReserveMany", fault{err: errRefused}) },
			told:   []string{"sold out F", "back in stock F"}},
		{name: "order redeemed on another voucher: refused, given back", total: 2, remaining: 2, want: voucher.ErrAlreadyUsed,
			before: orderOnAnotherVoucher},
		{name: "order released before: refused, given back", total: 2, remaining: 2, want: voucher.ErrReleased,
			before: releasedBefore("F")},
		{name: "outcome unknown, nothing committed: left held", total: 2, remaining: 1, want: voucher.ErrUnavailable, held: true,
			before: func(t *testing.T, f *fakeEnv) { f.store.arm("ReserveMany", fault{err: errCut}) }},
		{name: "outcome unknown, committed: answered from the row", total: 2, remaining: 1, held: true, row: true, granted: []string{"o1"},
			before: func(t *testing.T, f *fakeEnv) { f.store.arm("ReserveMany", fault{err: errCut, commit: true}) }},
		{name: "outcome unknown and the read back fails: left held", total: 2, remaining: 1, want: voucher.ErrUnavailable, held: true,
			before: func(t *testing.T, f *fakeEnv) {
				f.store.arm("ReserveMany", fault{err: errCut})
				f.store.arm("Redemption", fault{err: errTimeout})
			}},
		{name: "refused and the read back fails: left held", total: 2, remaining: 1, want: voucher.ErrUnavailable, held: true,
			before: func(t *testing.T, f *fakeEnv) {
				orderOnAnotherVoucher(t, f)
				f.store.arm("Redemption", fault{err: errTimeout})
			}},
		{name: "the give-back fails: left held", total: 2, remaining: 1, want: voucher.ErrUnavailable, held: true,
			before: func(t *testing.T, f *fakeEnv) {
				f.store.arm("ReserveMany", fault{err: errRefused})
				f.gate.arm("Release", fault{err: errTimeout})
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeEnv(voucher.Config{})
			f.create(t, "F", c.total, 1, true)
			f.warm(t, "F")
			if c.before != nil {
				c.before(t, f)
			}
			n := f.note.count()
			r, err := f.reserve("F", "c1", "o1")
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("answered %v; want 201", err)
			case c.want == nil:
				if row, _ := f.store.row("o1"); r != row {
					t.Errorf("answered %+v; want the committed row %+v", r, row)
				}
			case !errors.Is(err, c.want):
				t.Fatalf("answered %+v %v; want %v", r, err, c.want)
			}
			remaining, held := f.gate.state("F", "o1")
			if held != c.held {
				t.Errorf("o1 held in the gate: %v; want %v", held, c.held)
			}
			if remaining != c.remaining {
				t.Errorf("the gate has %d uses left; want %d", remaining, c.remaining)
			}
			row, ok := f.store.row("o1")
			if (ok && row.VoucherCode == "F" && row.Active()) != c.row {
				t.Errorf("o1's row: %+v (found %v); want active on F: %v", row, ok, c.row)
			}
			if told := f.note.since(n); !slices.Equal(told, c.told) {
				t.Errorf("told the edges %q; want %q", told, c.told)
			}
			f.check(t, "F", c.granted...)
		})
	}
}

// Redis lost an order the database holds: the order takes a use anew, the database refuses
// (order taken, the customer's slot taken or no use left, by the order itself), and the service
// reads the row back: the same 201, and the gate's new entry is right, so it is kept (R1, R2).
func TestOrderTheDatabaseHoldsIsAnsweredAndKeptInTheGate(t *testing.T) {
	cases := []struct {
		name           string
		total, perUser int
		refusal        error
	}{
		{name: "order exists", total: 3, perUser: 2, refusal: voucher.ErrOrderExists},
		{name: "customer's slot taken by the order", total: 3, perUser: 1, refusal: voucher.ErrAlreadyUsed},
		{name: "last use taken by the order", total: 1, perUser: 1, refusal: voucher.ErrOutOfStock},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeEnv(voucher.Config{})
			f.create(t, "F", c.total, c.perUser, true)
			first := f.mustReserve(t, "F", "c1", "o1")
			f.gate.lose("F", "o1")
			again, err := f.reserve("F", "c1", "o1")
			if err != nil || again != first {
				t.Fatalf("retry after Redis lost the order: %+v %v; want the first answer %+v", again, err, first)
			}
			if got := f.store.refusals(); len(got) != 1 || got[0] != c.refusal {
				t.Errorf("the database refused %v; want %v", got, c.refusal)
			}
			if remaining, held := f.gate.state("F", "o1"); !held || remaining != int64(c.total-1) {
				t.Errorf("gate: o1 held %v, %d left; want held, %d left", held, remaining, c.total-1)
			}
			f.check(t, "F", "o1")
		})
	}
}

// outcome is a reservation's answer, from a request run in its own goroutine.
type outcome struct {
	r   voucher.Redemption
	err error
}

func (f *fakeEnv) reserveAsync(code, customer, order string) <-chan outcome {
	return reserveAsync(f.svc, code, customer, order)
}

// reserveAsync reserves through svc in a goroutine of its own.
func reserveAsync(svc *voucher.Service, code, customer, order string) <-chan outcome {
	c := make(chan outcome, 1)
	go func() {
		r, err := svc.Reserve(context.Background(), voucher.Request{Code: code, CustomerID: customer, OrderID: order, OrderAmount: 100})
		c <- outcome{r, err}
	}()
	return c
}

// inFlight holds an order's first write until released, and tells when it started, when a
// retry's take found the order held, and how often the order was looked for meanwhile.
type inFlight struct {
	writing, retried, polling, commit chan struct{}
	lookups                           atomic.Int32 // the order's row read, or its hold in the gate
}

func holdFirstWrite(f *fakeEnv, order string) *inFlight {
	w := &inFlight{writing: make(chan struct{}), retried: make(chan struct{}), polling: make(chan struct{}), commit: make(chan struct{})}
	var wrote, polled sync.Once
	var takes atomic.Int32
	f.store.hook = func(op string, orders []string) {
		switch {
		case op == "ReserveMany" && slices.Contains(orders, order):
			wrote.Do(func() { close(w.writing); <-w.commit })
		case op == "Redemption" && slices.Contains(orders, order):
			w.lookups.Add(1)
		}
	}
	f.gate.hook = func(op, o string) {
		switch {
		case op == "Reserve" && o == order && takes.Add(1) == 2:
			close(w.retried)
		case op == "Holding" && o == order:
			w.lookups.Add(1)
			polled.Do(func() { close(w.polling) })
		}
	}
	return w
}

// A retry that finds its order held in the gate while the first attempt is still writing does
// not answer before the row is committed (D4). Then it answers the same 201; or, if the first
// write certainly failed and gave its use back, it takes a use anew and is granted while the
// first attempt answers 503. Either way one use is taken. A retry on the backend writing the
// first attempt waits for that write in memory, looking for nothing meanwhile; one on another
// backend polls the gate and the database.
func TestRetryInFlightWaitsForTheFirstAttemptsOutcome(t *testing.T) {
	cases := []struct {
		name       string
		firstWrite error // the first attempt's write fails with it
		firstWant  error
	}{
		{name: "the first attempt commits: the same 201"},
		{name: "the first attempt gives its use back: the retry takes anew", firstWrite: errRefused, firstWant: voucher.ErrUnavailable},
	}
	for _, c := range cases {
		for _, elsewhere := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, retried on another backend %v", c.name, elsewhere), func(t *testing.T) {
				f := newFakeEnv(voucher.Config{InFlightWait: time.Minute})
				f.create(t, "F", 2, 1, true)
				f.warm(t, "F")
				w := holdFirstWrite(f, "o1")
				if c.firstWrite != nil {
					f.store.arm("ReserveMany", fault{err: c.firstWrite}) // taken by the first write once it goes on
				}
				first := f.reserveAsync("F", "c1", "o1")
				<-w.writing
				if elsewhere {
					other := voucher.NewService(f.store, f.gate, f.note, f.cfg)
					retry := reserveAsync(other, "F", "c1", "o1")
					<-w.polling // o1 is held, its row not written
					checkRetryWaits(t, f, w, c.firstWant, first, retry)
					return
				}
				retry := f.reserveAsync("F", "c1", "o1")
				<-w.retried
				time.Sleep(50 * time.Millisecond) // a poll every 5, 10, 20 ms would have looked three times
				if n := w.lookups.Load(); n != 0 {
					t.Errorf("the retry looked for o1 %d times while its first attempt was writing here; want none", n)
				}
				checkRetryWaits(t, f, w, c.firstWant, first, retry)
			})
		}
	}
}

// checkRetryWaits checks that the retry has not answered, lets the first write go on, and
// checks both answers, the gate and the invariants.
func checkRetryWaits(t *testing.T, f *fakeEnv, w *inFlight, firstWant error, first, retry <-chan outcome) {
	t.Helper()
	select {
	case a := <-retry:
		t.Fatalf("the retry answered %+v %v before the first attempt's outcome", a.r, a.err)
	default:
	}
	close(w.commit)
	a, b := <-first, <-retry
	if !errors.Is(a.err, firstWant) || (firstWant == nil && a.r.OrderID != "o1") {
		t.Errorf("first attempt: %+v %v; want %v", a.r, a.err, firstWant)
	}
	if row, _ := f.store.row("o1"); b.err != nil || b.r != row {
		t.Fatalf("retry: %+v %v; want 201 with the row %+v", b.r, b.err, row)
	}
	if remaining, held := f.gate.state("F", "o1"); !held || remaining != 1 {
		t.Errorf("gate: o1 held %v, %d left; want held once, 1 left", held, remaining)
	}
	f.check(t, "F", "o1")
}

// A retry that cannot learn the first attempt's outcome in time answers 503 and takes no use.
func TestRetryInFlightAnswersUnavailableWhenItCannotLearnTheOutcome(t *testing.T) {
	f := newFakeEnv(voucher.Config{InFlightWait: time.Nanosecond})
	f.create(t, "F", 2, 1, true)
	f.warm(t, "F")
	w := holdFirstWrite(f, "o1")
	first := f.reserveAsync("F", "c1", "o1")
	<-w.writing
	if _, err := f.reserve("F", "c1", "o1"); !errors.Is(err, voucher.ErrUnavailable) {
		t.Errorf("retry while the first write is in flight: %v; want ErrUnavailable", err)
	}
	if remaining, held := f.gate.state("F", "o1"); !held || remaining != 1 {
		t.Errorf("gate: o1 held %v, %d left; want held once, 1 left", held, remaining)
	}
	close(w.commit)
	if a := <-first; a.err != nil {
		t.Fatalf("first attempt: %v; want 201", a.err)
	}
	f.check(t, "F", "o1")
}

// A hold with no row older than any write can last (2×DBTimeout, on the service's clock)
// belongs to an attempt that died: the retry gives it back, telling the edges when that ends a
// sell-out, and takes a use anew. A younger one is waited for; a give-back that fails is 503.
func TestRetryOfAHoldWithNoRow(t *testing.T) {
	cases := []struct {
		name        string
		age         time.Duration
		releaseFail bool
		want        error
		told        []string
	}{
		{name: "stale: given back and granted", age: time.Second, told: []string{"back in stock F", "sold out F"}},
		{name: "young: still in flight", age: 100 * time.Millisecond, want: voucher.ErrUnavailable},
		{name: "stale, and the give-back fails", age: time.Second, releaseFail: true, want: voucher.ErrUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeEnv(voucher.Config{DBTimeout: 200 * time.Millisecond, InFlightWait: time.Nanosecond})
			f.create(t, "F", 1, 1, true)
			f.warm(t, "F")
			f.hang(t, "F", "c1", "o1") // o1's first attempt died after its take
			f.clock.Advance(c.age)
			if c.releaseFail {
				f.gate.arm("Release", fault{err: errTimeout})
			}
			n := f.note.count()
			r, err := f.reserve("F", "c1", "o1")
			if c.want == nil && (err != nil || r.OrderID != "o1") {
				t.Fatalf("retry: %+v %v; want 201", r, err)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("retry: %+v %v; want %v", r, err, c.want)
			}
			if told := f.note.since(n); !slices.Equal(told, c.told) {
				t.Errorf("told the edges %q; want %q", told, c.told)
			}
			granted := []string{}
			if c.want == nil {
				granted = append(granted, "o1")
			}
			f.check(t, "F", granted...)
		})
	}
}

// A write whose outcome is unknown converges on the client's retries to one reservation, on
// either path, whether or not it had committed.
func TestUnknownOutcomeConvergesToOneReservation(t *testing.T) {
	for _, flash := range []bool{false, true} {
		for _, committed := range []bool{false, true} {
			code := map[bool]string{false: "N", true: "F"}[flash]
			name := code + map[bool]string{false: " not committed", true: " committed"}[committed]
			t.Run(name, func(t *testing.T) {
				f := newFakeEnv(voucher.Config{DBTimeout: 200 * time.Millisecond, InFlightWait: time.Nanosecond})
				f.create(t, code, 2, 1, flash)
				f.store.arm("ReserveMany", fault{err: errCut, commit: committed}) // both paths write through the voucher's writer
				first, err := f.reserve(code, "c1", "o1")
				if flash && committed {
					if err != nil { // the row is read back at once
						t.Fatalf("first attempt: %v; want 201 read back", err)
					}
				} else if !errors.Is(err, voucher.ErrUnavailable) {
					t.Fatalf("first attempt: %+v %v; want ErrUnavailable", first, err)
				}
				if flash && !committed {
					// held with no row: the retry waits for it, then takes it for stale
					if _, err := f.reserve(code, "c1", "o1"); !errors.Is(err, voucher.ErrUnavailable) {
						t.Fatalf("retry while the hold is young: %v; want ErrUnavailable", err)
					}
					f.clock.Advance(time.Second)
				}
				r := f.mustReserve(t, code, "c1", "o1")
				if again := f.mustReserve(t, code, "c1", "o1"); again != r {
					t.Errorf("second retry %+v; want %+v", again, r)
				}
				if f.store.used(code) != 1 {
					t.Errorf("used_count %d; want 1", f.store.used(code))
				}
				f.check(t, code, "o1")
			})
		}
	}
}

// The writer does not send a hold whose write could end after a retry may take it for stale:
// a hold whose request ended before it was sent, or that waited DBTimeout since its take, is
// answered ErrNotWritten, so its use goes back at once and the answer is 503.
func TestWriterDoesNotSendALateHold(t *testing.T) {
	cases := []struct {
		name  string
		delay func(f *fakeEnv, cancel context.CancelFunc)
	}{
		{name: "request ended before the write was sent", delay: func(f *fakeEnv, cancel context.CancelFunc) { cancel() }},
		{name: "hold waited DBTimeout to be written", delay: func(f *fakeEnv, cancel context.CancelFunc) {
			f.clock.Advance(f.cfg.DBTimeout)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeEnv(voucher.Config{DBTimeout: 300 * time.Millisecond})
			f.create(t, "F", 1, 1, true)
			f.warm(t, "F")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f.gate.hook = func(op, _ string) { // after the reservation time, before the take
				if op == "Reserve" {
					c.delay(f, cancel)
				}
			}
			var seen calls
			f.store.hook = func(op string, _ []string) { seen.add(op) }
			n := f.note.count()
			_, err := f.svc.Reserve(ctx, voucher.Request{Code: "F", CustomerID: "c1", OrderID: "o1", OrderAmount: 100})
			if !errors.Is(err, voucher.ErrUnavailable) {
				t.Fatalf("answered %v; want ErrUnavailable", err)
			}
			if seen.count("ReserveMany") != 0 {
				t.Errorf("the late hold was sent to the database")
			}
			if remaining, held := f.gate.state("F", "o1"); held || remaining != 1 {
				t.Errorf("gate: o1 held %v, %d left; want its use given back", held, remaining)
			}
			if told := f.note.since(n); !slices.Equal(told, []string{"sold out F", "back in stock F"}) {
				t.Errorf("told the edges %q; want sold out then back in stock", told)
			}
			f.check(t, "F")
		})
	}
}

// Winners written together are answered each on its own: one the database refuses is given
// back and refused, its neighbours are granted, however the writer batched them.
func TestWinnersWrittenTogetherAreAnsweredEachOnItsOwn(t *testing.T) {
	f := newFakeEnv(voucher.Config{})
	f.create(t, "F", 10, 1, true)
	f.create(t, "M", 1, 1, false)
	f.commit(t, "M", "c3", "o3") // o3 is taken on another voucher: the database refuses it on F
	f.warm(t, "F")
	orders := []string{"o1", "o2", "o3", "o4", "o5", "o6"}
	answers := make([]<-chan outcome, len(orders))
	for i, o := range orders {
		answers[i] = f.reserveAsync("F", "c"+o[1:], o)
	}
	var granted []string
	for i, o := range orders {
		a := <-answers[i]
		switch {
		case o == "o3" && !errors.Is(a.err, voucher.ErrAlreadyUsed):
			t.Errorf("o3: %+v %v; want ErrAlreadyUsed", a.r, a.err)
		case o != "o3" && (a.err != nil || a.r.OrderID != o):
			t.Errorf("%s: %+v %v; want 201", o, a.r, a.err)
		case o != "o3":
			granted = append(granted, o)
		}
	}
	if remaining, held := f.gate.state("F", "o3"); held || remaining != 5 {
		t.Errorf("gate: o3 held %v, %d left; want o3 given back, 5 left", held, remaining)
	}
	batches, holds := f.svc.WriteBatches()
	t.Logf("%d holds written in %d batches (%v)", holds, batches, f.store.batches)
	f.check(t, "F", granted...)
}
