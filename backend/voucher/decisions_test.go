package voucher_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// calls counts the calls of each method a fake's hook sees.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) add(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[op]++
}

func (c *calls) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

// The normal voucher's answers: eligibility, one guarded write, its refusals, a retry answered
// from the row, and a store failure answered 503 with nothing written.
func TestNormalReservationDecisions(t *testing.T) {
	cases := []struct {
		name           string
		total, perUser int
		shape          func(*voucher.Voucher)
		before         func(t *testing.T, f *fakeEnv)
		code           string // "N" unless set
		amount         int64  // 100 unless set
		want           error
		discount       int64    // granted: the discount answered
		granted        []string // orders that hold an active row at the end
		writes         int      // Store.Reserve calls
		noLookup       bool     // the store is not asked about the order at all
	}{
		{name: "grants a use", total: 2, perUser: 1, discount: 30, granted: []string{"o1"}, writes: 1},
		{name: "discount is at most the order amount", total: 2, perUser: 1,
			shape: func(v *voucher.Voucher) { v.DiscountAmount = 500 }, discount: 100, granted: []string{"o1"}, writes: 1},
		{name: "order below the minimum", total: 2, perUser: 1, amount: 49, want: voucher.ErrNotEligible},
		{name: "not open yet: no lookup", total: 2, perUser: 1,
			shape: func(v *voucher.Voucher) { v.StartsAt = v.EndsAt.Add(-time.Hour) }, want: voucher.ErrNotEligible, noLookup: true},
		{name: "ended", total: 2, perUser: 1,
			shape: func(v *voucher.Voucher) { v.EndsAt = v.StartsAt.Add(time.Minute) }, want: voucher.ErrNotEligible},
		{name: "unknown voucher", total: 2, perUser: 1, code: "NOPE", want: voucher.ErrVoucherNotFound},
		{name: "voucher read fails", total: 2, perUser: 1, want: voucher.ErrUnavailable,
			before: func(t *testing.T, f *fakeEnv) { f.store.arm("Voucher", fault{err: errTimeout}) }},
		{name: "sold out: answered from the lookup, no write", total: 1, perUser: 1, want: voucher.ErrOutOfStock,
			before: func(t *testing.T, f *fakeEnv) { f.commit(t, "N", "c0", "o0") }, granted: []string{"o0"}},
		{name: "customer at the per-customer limit", total: 3, perUser: 1, want: voucher.ErrAlreadyUsed, writes: 1,
			before: func(t *testing.T, f *fakeEnv) { f.commit(t, "N", "c1", "o0") }, granted: []string{"o0"}},
		{name: "second order within a per-customer limit of 2", total: 3, perUser: 2, discount: 30, writes: 1,
			before: func(t *testing.T, f *fakeEnv) { f.commit(t, "N", "c1", "o0") }, granted: []string{"o0", "o1"}},
		{name: "a released reservation frees the customer's slot", total: 3, perUser: 1, discount: 30, writes: 1,
			before: func(t *testing.T, f *fakeEnv) {
				f.commit(t, "N", "c1", "o0")
				if _, err := f.svc.Release(context.Background(), "N", "o0"); err != nil {
					t.Fatal(err)
				}
			}, granted: []string{"o1"}},
		{name: "order of another customer", total: 3, perUser: 1, want: voucher.ErrAlreadyUsed,
			before: func(t *testing.T, f *fakeEnv) { f.commit(t, "N", "c2", "o1") }},
		{name: "order redeemed on another voucher", total: 3, perUser: 1, want: voucher.ErrAlreadyUsed,
			before: orderOnAnotherVoucher},
		{name: "released order", total: 3, perUser: 1, want: voucher.ErrReleased, before: releasedBefore("N")},
		{name: "lookup fails", total: 2, perUser: 1, want: voucher.ErrUnavailable,
			before: func(t *testing.T, f *fakeEnv) { f.store.arm("Lookup", fault{err: errTimeout}) }},
		{name: "write certainly not written", total: 2, perUser: 1, want: voucher.ErrUnavailable, writes: 1,
			before: func(t *testing.T, f *fakeEnv) { f.store.arm("ReserveMany", fault{err: errRefused}) }},
		{name: "write outcome unknown, nothing committed", total: 2, perUser: 1, want: voucher.ErrUnavailable, writes: 1,
			before: func(t *testing.T, f *fakeEnv) { f.store.arm("ReserveMany", fault{err: errCut}) }},
		{name: "write outcome unknown, committed", total: 2, perUser: 1, want: voucher.ErrUnavailable, writes: 1,
			before:  func(t *testing.T, f *fakeEnv) { f.store.arm("ReserveMany", fault{err: errCut, commit: true}) },
			granted: []string{"o1"}},
		{name: "another order took the last use after the lookup", total: 1, perUser: 1, want: voucher.ErrOutOfStock, writes: 1,
			before: func(t *testing.T, f *fakeEnv) {
				f.store.hook = func(op string, _ []string) {
					if op == "ReserveMany" {
						f.commit(t, "N", "c2", "o2")
					}
				}
			}, granted: []string{"o2"}},
		{name: "a refusal whose read back fails", total: 1, perUser: 1, want: voucher.ErrUnavailable, writes: 1,
			before: func(t *testing.T, f *fakeEnv) {
				f.store.hook = func(op string, _ []string) {
					if op == "ReserveMany" {
						f.commit(t, "N", "c2", "o2")
						f.store.arm("Redemption", fault{err: errTimeout})
					}
				}
			}, granted: []string{"o2"}},
		// A concurrent attempt at the same order commits between the lookup and the write; the
		// write's refusal depends on what that took, and each is answered from its row.
		{name: "same order committed meanwhile: order exists", total: 3, perUser: 2, discount: 30, writes: 1,
			before: sameOrderCommitsFirst, granted: []string{"o1"}},
		{name: "same order committed meanwhile: took the customer's last slot", total: 3, perUser: 1, discount: 30, writes: 1,
			before: sameOrderCommitsFirst, granted: []string{"o1"}},
		{name: "same order committed meanwhile: took the last use", total: 1, perUser: 1, discount: 30, writes: 1,
			before: sameOrderCommitsFirst, granted: []string{"o1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeEnv(voucher.Config{HoldTTL: 10 * time.Minute})
			f.create(t, "N", c.total, c.perUser, false, c.shape)
			if c.before != nil {
				c.before(t, f)
			}
			var seen calls
			hook := f.store.hook
			f.store.hook = func(op string, orders []string) {
				seen.add(op)
				if hook != nil {
					hook(op, orders)
				}
			}
			code, amount := or(c.code, "N"), or(c.amount, 100)
			now := f.clock.Now()
			_, had := f.store.row("o1")
			r, err := f.svc.Reserve(context.Background(), voucher.Request{Code: code, CustomerID: "c1", OrderID: "o1", OrderAmount: amount})
			if c.want != nil {
				if !errors.Is(err, c.want) {
					t.Fatalf("answered %+v %v; want %v", r, err, c.want)
				}
			} else {
				if err != nil {
					t.Fatalf("answered %v; want 201", err)
				}
				if row, _ := f.store.row("o1"); r != row {
					t.Errorf("answered %+v; want the committed row %+v", r, row)
				}
				if r.OrderID != "o1" || r.CustomerID != "c1" || r.Status != wire.StatusReserved || r.DiscountAmount != c.discount ||
					r.OrderAmount != amount || r.HoldExpiresAt.Sub(r.ReservedAt) != 10*time.Minute || r.ReservedAt.Before(now) {
					t.Errorf("answered %+v; want o1 of c1 RESERVED with discount %d, held 10m", r, c.discount)
				}
			}
			if seen.count("ReserveMany") != c.writes {
				t.Errorf("%d writes; want %d", seen.count("ReserveMany"), c.writes)
			}
			if c.noLookup && seen.count("Redemption")+seen.count("Lookup") > 0 {
				t.Errorf("the order was looked up before the voucher opened")
			}
			if _, ok := f.store.row("o1"); ok && !had && !slices.Contains(c.granted, "o1") {
				t.Errorf("o1 has a row after a refusal; want none")
			}
			f.check(t, "N", c.granted...)
		})
	}
}

// orderOnAnotherVoucher gives o1 of c1 an active row on the normal voucher M.
func orderOnAnotherVoucher(t *testing.T, f *fakeEnv) {
	f.create(t, "M", 1, 1, false)
	f.commit(t, "M", "c1", "o1")
}

// releasedBefore has o1 of c1 granted on code, then released.
func releasedBefore(code string) func(t *testing.T, f *fakeEnv) {
	return func(t *testing.T, f *fakeEnv) {
		f.mustReserve(t, code, "c1", "o1")
		if _, err := f.svc.Release(context.Background(), code, "o1"); err != nil {
			t.Fatal(err)
		}
	}
}

// sameOrderCommitsFirst makes a concurrent attempt at o1 commit just before the service's write.
func sameOrderCommitsFirst(t *testing.T, f *fakeEnv) {
	var once sync.Once
	f.store.hook = func(op string, _ []string) {
		if op == "ReserveMany" {
			once.Do(func() { f.commit(t, "N", "c1", "o1") })
		}
	}
}

// The flash voucher's answers: the gate decides, only its winners write, and the edges hear
// when the last use goes or a request finds none left.
func TestFlashReservationDecisions(t *testing.T) {
	cases := []struct {
		name           string
		total, perUser int
		shape          func(*voucher.Voucher)
		cold           bool // not loaded in the gate before the request
		before         func(t *testing.T, f *fakeEnv)
		want           error
		granted        []string // orders holding an active row at the end
		remaining      int64    // the gate's uses left at the end
		told           []string // what the edges were told during the request
		writes         int      // Store.ReserveMany calls during the request
	}{
		{name: "grants a use", total: 3, perUser: 1, granted: []string{"o1"}, remaining: 2, writes: 1},
		{name: "the last use: sold out told", total: 1, perUser: 1, granted: []string{"o1"}, remaining: 0,
			told: []string{"sold out F"}, writes: 1},
		{name: "none left: refused, sold out told", total: 1, perUser: 1, want: voucher.ErrOutOfStock,
			before: func(t *testing.T, f *fakeEnv) { f.mustReserve(t, "F", "c0", "o0") }, granted: []string{"o0"},
			told: []string{"sold out F"}},
		{name: "customer at the per-customer limit", total: 3, perUser: 1, want: voucher.ErrAlreadyUsed,
			before: func(t *testing.T, f *fakeEnv) { f.mustReserve(t, "F", "c1", "o0") }, granted: []string{"o0"}, remaining: 2},
		{name: "second order within a per-customer limit of 2", total: 3, perUser: 2,
			before: func(t *testing.T, f *fakeEnv) { f.mustReserve(t, "F", "c1", "o0") }, granted: []string{"o0", "o1"},
			remaining: 1, writes: 1},
		{name: "order held by another customer", total: 3, perUser: 1, want: voucher.ErrAlreadyUsed,
			before: func(t *testing.T, f *fakeEnv) { f.mustReserve(t, "F", "c2", "o1") }, granted: []string{"o1"}, remaining: 2},
		{name: "not loaded: loaded from the database, then granted", total: 3, perUser: 1, cold: true,
			before: func(t *testing.T, f *fakeEnv) { f.commit(t, "F", "c0", "o0") }, granted: []string{"o0", "o1"},
			remaining: 1, told: []string{"back in stock F"}, writes: 1},
		{name: "not loaded and the load fails", total: 3, perUser: 1, cold: true, want: voucher.ErrUnavailable,
			before: func(t *testing.T, f *fakeEnv) { f.gate.arm("Load", fault{err: errTimeout}) }},
		{name: "still not loaded after loading", total: 3, perUser: 1, want: voucher.ErrUnavailable,
			before: func(t *testing.T, f *fakeEnv) {
				f.gate.hook = func(op, _ string) { // Redis loses the voucher before every take
					if op == "Reserve" {
						f.gate.flush("F")
					}
				}
			}, told: []string{"back in stock F"}},
		{name: "the gate does not answer", total: 3, perUser: 1, want: voucher.ErrUnavailable, remaining: 3,
			before: func(t *testing.T, f *fakeEnv) { f.gate.arm("Reserve", fault{err: errTimeout}) }},
		{name: "closed: the gate is not asked", total: 3, perUser: 1, want: voucher.ErrNotEligible, remaining: 3,
			shape: func(v *voucher.Voucher) { v.EndsAt = v.StartsAt.Add(time.Minute) },
			before: func(t *testing.T, f *fakeEnv) {
				f.gate.hook = func(op, _ string) { t.Errorf("the gate was asked (%s) about a closed voucher", op) }
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeEnv(voucher.Config{})
			f.create(t, "F", c.total, c.perUser, true, c.shape)
			if !c.cold {
				f.warm(t, "F")
			}
			if c.before != nil {
				c.before(t, f)
			}
			var seen calls
			f.store.hook = func(op string, _ []string) { seen.add(op) }
			n := f.note.count()
			r, err := f.reserve("F", "c1", "o1")
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("answered %v; want 201", err)
			case c.want == nil:
				if row, _ := f.store.row("o1"); r != row || r.DiscountAmount != 30 {
					t.Errorf("answered %+v; want the committed row %+v with discount 30", r, row)
				}
			case !errors.Is(err, c.want):
				t.Fatalf("answered %+v %v; want %v", r, err, c.want)
			}
			if told := f.note.since(n); !slices.Equal(told, c.told) {
				t.Errorf("told the edges %q; want %q", told, c.told)
			}
			if seen.count("ReserveMany") != c.writes {
				t.Errorf("%d batches written; want %d", seen.count("ReserveMany"), c.writes)
			}
			if remaining, _ := f.gate.state("F", ""); remaining != c.remaining {
				t.Errorf("the gate has %d uses left; want %d", remaining, c.remaining)
			}
			f.check(t, "F", c.granted...)
		})
	}
}

// Without a Redis gate a flash voucher answers 503 and cannot be loaded; a normal voucher
// keeps working.
func TestNoGateFlashUnavailableNormalWorks(t *testing.T) {
	f := newFakeEnv(voucher.Config{})
	f.svc = voucher.NewService(f.store, nil, f.note, f.cfg)
	f.create(t, "F", 2, 1, true)
	f.create(t, "N", 2, 1, false)
	if _, err := f.reserve("F", "c1", "o1"); !errors.Is(err, voucher.ErrUnavailable) {
		t.Errorf("flash reservation without a gate: %v; want ErrUnavailable", err)
	}
	if err := f.svc.Warm(context.Background(), "F"); !errors.Is(err, voucher.ErrUnavailable) {
		t.Errorf("warm without a gate: %v; want ErrUnavailable", err)
	}
	f.mustReserve(t, "N", "c1", "o2")
	f.check(t, "N", "o2")
	f.check(t, "F")
}

// Redis does not answer: flash reservations answer 503 at once, normal vouchers keep working.
func TestGateDownNormalVouchersWork(t *testing.T) {
	f := newFakeEnv(voucher.Config{})
	f.create(t, "F", 2, 1, true)
	f.create(t, "N", 2, 1, false)
	f.gate.hook = func(op, _ string) { f.gate.arm(op, fault{err: errTimeout}) } // every call fails
	if _, err := f.reserve("F", "c1", "o1"); !errors.Is(err, voucher.ErrUnavailable) {
		t.Errorf("flash reservation with the gate down: %v; want ErrUnavailable", err)
	}
	f.mustReserve(t, "N", "c1", "o2")
	if _, err := f.svc.Release(context.Background(), "N", "o2"); err != nil {
		t.Errorf("release on a normal voucher with the gate down: %v", err)
	}
	f.check(t, "N")
}

// A granted order's retry gets the same 201 with the same discount, on either path, even once
// the voucher sold out, ended or the reservation was confirmed; it never takes a second use.
func TestRetryOfAGrantedOrderGetsTheSameAnswer(t *testing.T) {
	then := []struct {
		name string
		do   func(t *testing.T, f *fakeEnv, code string)
	}{
		{name: "at once"},
		{name: "after the voucher sold out", do: func(t *testing.T, f *fakeEnv, code string) {
			f.mustReserve(t, code, "c2", "o2")
			if _, err := f.reserve(code, "c3", "o3"); !errors.Is(err, voucher.ErrOutOfStock) {
				t.Fatalf("a new order after the sell-out: %v; want ErrOutOfStock", err)
			}
		}},
		{name: "after the voucher ended", do: func(t *testing.T, f *fakeEnv, code string) { f.clock.Advance(25 * time.Hour) }},
		{name: "after it was confirmed", do: func(t *testing.T, f *fakeEnv, code string) {
			if _, err := f.svc.Confirm(context.Background(), code, "o1"); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "after an edit postponed the start", do: func(t *testing.T, f *fakeEnv, code string) { postpone(t, f, code, false) }},
		{name: "after an edit postponed the start and paused it", do: func(t *testing.T, f *fakeEnv, code string) { postpone(t, f, code, true) }},
	}
	for _, flash := range []bool{false, true} {
		for _, th := range then {
			code := map[bool]string{false: "N", true: "F"}[flash]
			t.Run(code+" "+th.name, func(t *testing.T) {
				f := newFakeEnv(voucher.Config{})
				f.create(t, code, 2, 1, flash)
				first := f.mustReserve(t, code, "c1", "o1")
				if th.do != nil {
					th.do(t, f, code)
				}
				used := f.store.used(code)
				again, err := f.svc.Reserve(context.Background(), voucher.Request{Code: code, CustomerID: "c1", OrderID: "o1", OrderAmount: 70})
				if err != nil {
					t.Fatalf("retry: %v; want the same 201", err)
				}
				if again.DiscountAmount != first.DiscountAmount || again.OrderID != "o1" || !again.ReservedAt.Equal(first.ReservedAt) {
					t.Errorf("retry answered %+v; want the first answer %+v", again, first)
				}
				if f.store.used(code) != used {
					t.Errorf("the retry took a use: used_count %d, was %d", f.store.used(code), used)
				}
				dry, err := f.svc.Validate(context.Background(), voucher.Request{Code: code, CustomerID: "c1", OrderID: "o1", OrderAmount: 70})
				if err != nil || dry.DiscountAmount != first.DiscountAmount {
					t.Errorf("validate of the granted order: %+v, %v; want valid with its discount %d", dry, err, first.DiscountAmount)
				}
				f.check(t, code, "o1")
			})
		}
	}
}

// postpone edits the voucher's start to an hour from now (its end a day later), pausing it too
// when paused: a sale put off after it had granted orders.
func postpone(t *testing.T, f *fakeEnv, code string, paused bool) {
	t.Helper()
	starts := f.clock.Now().Add(time.Hour)
	ends := starts.Add(24 * time.Hour)
	e := voucher.Edit{StartsAt: &starts, EndsAt: &ends}
	if paused {
		active := false
		e.Active = &active
	}
	if _, err := f.svc.Edit(context.Background(), code, e); err != nil {
		t.Fatalf("postpone %s: %v", code, err)
	}
	if _, err := f.reserve(code, "c-new", "o-new"); !errors.Is(err, voucher.ErrNotEligible) {
		t.Fatalf("a new order of postponed %s: %v; want ErrNotEligible", code, err)
	}
}

// A refused order is decided again: granted once a use came back, on either path.
func TestRefusedOrderIsDecidedAgain(t *testing.T) {
	for _, flash := range []bool{false, true} {
		code := map[bool]string{false: "N", true: "F"}[flash]
		t.Run(code, func(t *testing.T) {
			f := newFakeEnv(voucher.Config{})
			f.create(t, code, 1, 1, flash)
			f.mustReserve(t, code, "c1", "o1")
			if _, err := f.reserve(code, "c2", "o2"); !errors.Is(err, voucher.ErrOutOfStock) {
				t.Fatalf("o2 while sold out: %v; want ErrOutOfStock", err)
			}
			if _, err := f.svc.Release(context.Background(), code, "o1"); err != nil {
				t.Fatal(err)
			}
			f.mustReserve(t, code, "c2", "o2")
			f.check(t, code, "o2")
		})
	}
}
