package voucher_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/voucher"
)

// Reconcile repairs the gate from the database: hanging orders past the grace period released
// (only the holder it saw), lost active rows put back, remaining and per-customer counts
// recounted, a voucher Redis lost loaded again; and tells the edges the state it leaves.
func TestReconcileDecisions(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		code    string                         // F unless set: 4 uses, o1 and o2 granted
		before  func(t *testing.T, f *fakeEnv) // then the clock moves on 2 minutes past a grace of 1
		want    error
		rep     voucher.Reconciliation // Code F unless set
		granted []string               // o1, o2 unless set
		told    []string
	}{
		{name: "in step: nothing to do", rep: voucher.Reconciliation{RemainingBefore: 2, RemainingAfter: 2, Expected: 2}},
		{name: "hanging order past the grace period: released",
			before: func(t *testing.T, f *fakeEnv) { f.hang(t, "F", "c9", "o9") },
			rep:    voucher.Reconciliation{Released: []string{"o9"}, RemainingBefore: 1, RemainingAfter: 2, Expected: 2, Drift: -1}},
		{name: "hanging order within the grace period: in flight",
			before: func(t *testing.T, f *fakeEnv) { // taken 30 s before the reconciliation
				f.clock.Advance(90 * time.Second)
				f.hang(t, "F", "c9", "o9")
				f.clock.Advance(-90 * time.Second)
			},
			rep: voucher.Reconciliation{InFlight: 1, RemainingBefore: 1, RemainingAfter: 1, Expected: 1, Drift: 0}}, // in flight is no drift
		{name: "a newer attempt at a hanging order keeps its use",
			before: func(t *testing.T, f *fakeEnv) {
				old := f.hang(t, "F", "c9", "o9")
				f.gate.hook = func(op, order string) { // between the read of holders and the give-back
					if op == "Release" && order == "o9" {
						f.gate.hook = nil
						f.gate.lose("F", "o9")
						f.hang(t, "F", "c9", "o9")
						if h, _, _ := f.gate.Holding(ctx, "F", "o9"); h.Same(old) {
							t.Errorf("the newer attempt has the old holder")
						}
					}
				}
			},
			rep: voucher.Reconciliation{RemainingBefore: 1, RemainingAfter: 1, Expected: 2, Drift: -1}},
		{name: "active row Redis lost: put back, holders changed told",
			before: func(t *testing.T, f *fakeEnv) { f.gate.lose("F", "o2") },
			rep:    voucher.Reconciliation{PutBack: []string{"o2"}, RemainingBefore: 3, RemainingAfter: 2, Expected: 2, Drift: 1},
			told:   []string{"holders changed F"}},
		{name: "remaining drifted: recounted",
			before: func(t *testing.T, f *fakeEnv) { f.gate.drift("F", -1) },
			rep:    voucher.Reconciliation{RemainingBefore: 1, RemainingAfter: 2, Expected: 2, Drift: -1, Recounted: true}},
		{name: "drifted to sold out: recounted, back in stock told",
			before: func(t *testing.T, f *fakeEnv) { f.gate.drift("F", -2) },
			rep:    voucher.Reconciliation{RemainingBefore: 0, RemainingAfter: 2, Expected: 2, Drift: -2, Recounted: true},
			told:   []string{"back in stock F"}},
		{name: "recounted to none left: sold out told",
			before: func(t *testing.T, f *fakeEnv) {
				f.mustReserve(t, "F", "c3", "o3")
				f.mustReserve(t, "F", "c4", "o4")
				f.gate.drift("F", 1)
			},
			rep:     voucher.Reconciliation{RemainingBefore: 1, RemainingAfter: 0, Expected: 0, Drift: 1, Recounted: true},
			granted: []string{"o1", "o2", "o3", "o4"}, told: []string{"sold out F"}},
		{name: "Redis lost the voucher: loaded again, and what was loaded is no drift",
			before: func(t *testing.T, f *fakeEnv) { f.gate.flush("F") },
			rep:    voucher.Reconciliation{Loaded: true, RemainingBefore: 2, RemainingAfter: 2, Expected: 2, Drift: 0},
			told:   []string{"back in stock F"}},
		{name: "normal voucher: nothing to reconcile", code: "N",
			before: func(t *testing.T, f *fakeEnv) {
				f.gate.hook = func(op, _ string) { t.Errorf("the gate was asked (%s) about a normal voucher", op) }
			},
			rep: voucher.Reconciliation{Code: "N"}},
		{name: "unknown voucher", code: "NOPE", want: voucher.ErrVoucherNotFound},
		{name: "the gate does not answer", want: voucher.ErrUnavailable,
			before: func(t *testing.T, f *fakeEnv) { f.gate.arm("Holders", fault{err: errTimeout}) }},
		{name: "the database does not answer", want: voucher.ErrUnavailable,
			before: func(t *testing.T, f *fakeEnv) { f.store.arm("ActiveRedemptions", fault{err: errTimeout}) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeEnv(voucher.Config{})
			f.create(t, "F", 4, 1, true)
			f.create(t, "N", 4, 1, false)
			f.mustReserve(t, "F", "c1", "o1")
			f.mustReserve(t, "F", "c2", "o2")
			if c.before != nil {
				c.before(t, f)
			}
			f.clock.Advance(2 * time.Minute)
			n := f.note.count()
			rep, err := f.svc.Reconcile(ctx, or(c.code, "F"), voucher.ReconcileConfig{Grace: time.Minute})
			if c.want != nil {
				if !errors.Is(err, c.want) {
					t.Fatalf("reconcile: %+v %v; want %v", rep, err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			want := c.rep
			want.Code = or(want.Code, "F")
			if !equalReports(rep, want) {
				t.Errorf("reconciled %+v; want %+v", rep, want)
			}
			if told := f.note.since(n); !slices.Equal(told, c.told) {
				t.Errorf("told the edges %q; want %q", told, c.told)
			}
			f.check(t, "F", orSlice(c.granted, []string{"o1", "o2"})...)
		})
	}
}

// orSlice is list, or otherwise when list is nil.
func orSlice(list, otherwise []string) []string {
	if list == nil {
		return otherwise
	}
	return list
}

// equalReports compares reports, the order of Released and PutBack aside.
func equalReports(a, b voucher.Reconciliation) bool {
	slices.Sort(a.Released)
	slices.Sort(a.PutBack)
	return slices.Equal(a.Released, b.Released) && slices.Equal(a.PutBack, b.PutBack) &&
		a.Code == b.Code && a.Loaded == b.Loaded && a.InFlight == b.InFlight && a.RemainingBefore == b.RemainingBefore &&
		a.RemainingAfter == b.RemainingAfter && a.Expected == b.Expected && a.Drift == b.Drift && a.Recounted == b.Recounted
}

// ReconcileAll reconciles every flash voucher that ended less than a day ago; one that fails
// does not stop the others, and its error is returned with theirs.
func TestReconcileAllGoesOnPastAFailure(t *testing.T) {
	f := newFakeEnv(voucher.Config{})
	ended := func(ago time.Duration) func(*voucher.Voucher) {
		return func(v *voucher.Voucher) { v.StartsAt, v.EndsAt = v.StartsAt.Add(-ago-time.Hour), v.StartsAt.Add(-ago) }
	}
	f.create(t, "A", 2, 1, true)
	f.create(t, "B", 2, 1, true)
	f.create(t, "Y", 2, 1, true, ended(time.Hour))
	f.create(t, "Z", 2, 1, true, ended(48*time.Hour))
	f.create(t, "N", 2, 1, false)
	f.gate.arm("Remaining", fault{err: errTimeout}) // A's, the first
	reps, err := f.svc.ReconcileAll(context.Background(), voucher.ReconcileConfig{Grace: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "reconcile A") || !errors.Is(err, voucher.ErrUnavailable) {
		t.Errorf("error %v; want A's ErrUnavailable", err)
	}
	var codes []string
	for _, r := range reps {
		codes = append(codes, r.Code)
	}
	if !slices.Equal(codes, []string{"B", "Y"}) {
		t.Errorf("reconciled %v; want B and Y (A failed, Z ended two days ago, N is not a flash voucher)", codes)
	}
}

// Warm loads a flash voucher from its active rows (remaining = total_limit - active), never
// adds uses when loaded already, and says what the state is now.
func TestWarmDecisions(t *testing.T) {
	cases := []struct {
		name      string
		active    int
		twice     bool
		remaining int64
		told      []string
	}{
		{name: "no active rows", remaining: 3, told: []string{"back in stock F"}},
		{name: "some active rows", active: 2, remaining: 1, told: []string{"back in stock F"}},
		{name: "every use active: sold out", active: 3, remaining: 0, told: []string{"sold out F"}},
		{name: "loaded already: no use added", active: 1, twice: true, remaining: 1,
			told: []string{"back in stock F", "back in stock F"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeEnv(voucher.Config{})
			f.create(t, "F", 3, 1, true)
			var granted []string
			for i := range c.active {
				o := "o" + string(rune('1'+i))
				f.commit(t, "F", "c"+o[1:], o)
				granted = append(granted, o)
			}
			f.warm(t, "F")
			if c.twice {
				f.hang(t, "F", "c9", "o9") // a take a load from the database would not have
				f.warm(t, "F")
			}
			if remaining, _ := f.gate.state("F", ""); remaining != c.remaining {
				t.Errorf("%d uses left after the load; want %d", remaining, c.remaining)
			}
			if told := f.note.since(0); !slices.Equal(told, c.told) {
				t.Errorf("told the edges %q; want %q", told, c.told)
			}
			f.check(t, "F", granted...)
		})
	}
}

// A write that commits between the load's read of the database and the load is not in the
// load: Warm reads again and puts it back, telling the edges its holders changed (R2).
func TestWarmPutsBackAnOrderCommittedDuringTheLoad(t *testing.T) {
	f := newFakeEnv(voucher.Config{})
	f.create(t, "F", 2, 1, true)
	f.gate.hook = func(op, _ string) {
		if op == "Load" {
			f.gate.hook = nil
			f.commit(t, "F", "c1", "o1")
		}
	}
	f.warm(t, "F")
	if remaining, held := f.gate.state("F", "o1"); !held || remaining != 1 {
		t.Errorf("gate: o1 held %v, %d left; want held, 1 left", held, remaining)
	}
	if told := f.note.since(0); !slices.Contains(told, "holders changed F") {
		t.Errorf("told the edges %q; want holders changed", told)
	}
	f.check(t, "F", "o1")
}

// Create stores the voucher and loads a flash one into the gate; a gate that does not answer
// does not fail it (the first reservation loads the voucher).
func TestCreateDecisions(t *testing.T) {
	ctx := context.Background()
	f := newFakeEnv(voucher.Config{})
	now := f.clock.Now()
	v := voucher.Voucher{Code: "F", DiscountAmount: 30, TotalLimit: 2, PerUserLimit: 1,
		StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour), FlashSale: true}
	if err := f.svc.Create(ctx, v); err != nil {
		t.Fatal(err)
	}
	if remaining, _ := f.gate.state("F", ""); remaining != 2 {
		t.Errorf("a new flash voucher has %d uses in the gate; want 2", remaining)
	}
	if err := f.svc.Create(ctx, v); !errors.Is(err, voucher.ErrVoucherExists) {
		t.Errorf("create again: %v; want ErrVoucherExists", err)
	}
	v.Code = "G"
	f.gate.arm("Load", fault{err: errTimeout})
	if err := f.svc.Create(ctx, v); err != nil {
		t.Errorf("create with the gate down: %v; want the voucher stored", err)
	}
	f.mustReserve(t, "G", "c1", "o1") // loads it
	f.check(t, "G", "o1")

	st, err := f.svc.Stats(ctx, "G")
	if err != nil || st.UsedCount != 1 || st.RedisRemaining == nil || *st.RedisRemaining != 1 {
		t.Errorf("stats %+v %v; want used 1 and 1 left in Redis", st, err)
	}
	v.Code, v.FlashSale = "N", false
	if err := f.svc.Create(ctx, v); err != nil {
		t.Fatal(err)
	}
	if st, err := f.svc.Stats(ctx, "N"); err != nil || st.RedisRemaining != nil {
		t.Errorf("a normal voucher's stats %+v %v; want no Redis count", st, err)
	}
}

// WarmUpcoming loads the flash vouchers open now or opening within the window that the gate
// does not hold yet, and counts them.
func TestWarmUpcomingDecisions(t *testing.T) {
	f := newFakeEnv(voucher.Config{})
	opens := func(in time.Duration) func(*voucher.Voucher) {
		return func(v *voucher.Voucher) { v.StartsAt = v.StartsAt.Add(time.Hour + in) }
	}
	f.create(t, "OPEN", 2, 1, true)
	f.create(t, "SOON", 2, 1, true, opens(30*time.Minute))
	f.create(t, "LATER", 2, 1, true, opens(2*time.Hour))
	f.create(t, "LOADED", 2, 1, true)
	f.create(t, "N", 2, 1, false)
	f.mustReserve(t, "LOADED", "c1", "o1")
	n, err := f.svc.WarmUpcoming(context.Background(), time.Hour)
	if err != nil || n != 2 {
		t.Errorf("warmed %d (%v); want OPEN and SOON", n, err)
	}
	for code, loaded := range map[string]bool{"OPEN": true, "SOON": true, "LATER": false, "LOADED": true, "N": false} {
		if _, ok, _ := f.gate.Remaining(context.Background(), code); ok != loaded {
			t.Errorf("%s loaded: %v; want %v", code, ok, loaded)
		}
	}
	f.check(t, "LOADED", "o1")
}

// Putting back orders the gate lost changes the holders of a sold-out state, and the Notifier's
// contract says so is told with HoldersChanged (keepHeld does). Telling only SoldOut is not
// enough: the notifier drops it when a refusal asked for one less than its interval ago, and the
// edges would keep a holder set without the put-back order, turning its retries away with 409
// although it holds a use (the failure table's "a granted order retries through an edge that
// knows the voucher sold out").
func TestReconcilePutBackTellsHoldersChanged(t *testing.T) {
	ctx := context.Background()
	f := soldOutWithALostOrder(t)
	f.clock.Advance(2 * time.Minute)
	n := f.note.count()
	rep, err := f.svc.Reconcile(ctx, "F", voucher.ReconcileConfig{Grace: time.Minute})
	if err != nil || !slices.Equal(rep.PutBack, []string{"o1"}) || rep.RemainingAfter != 0 {
		t.Fatalf("reconcile: %+v %v; want o1 put back, sold out", rep, err)
	}
	if told := f.note.since(n); !slices.Contains(told, "holders changed F") {
		t.Errorf("told the edges %q after putting o1 back into a sold-out voucher; want holders changed", told)
	}
	f.check(t, "F", "o1", "o2")
}

// soldOutWithALostOrder is F of 2 uses granted to o1 and o2, sold out in the gate to o2 and
// o9: a failover lost o1's take, and an attempt that then died took that use again.
func soldOutWithALostOrder(t *testing.T) *fakeEnv {
	f := newFakeEnv(voucher.Config{})
	f.create(t, "F", 2, 1, true)
	f.mustReserve(t, "F", "c1", "o1")
	f.mustReserve(t, "F", "c2", "o2")
	f.gate.lose("F", "o1")
	f.hang(t, "F", "c9", "o9")
	return f
}

// Warm says what the state is now: sold out at 0 uses left or fewer (a put-back may take
// remaining below zero, and reserve.lua refuses then), as Reconcile and notify.Snapshot count
// it; a loaded voucher below zero is not back in stock.
func TestWarmBelowZeroTellsSoldOut(t *testing.T) {
	ctx := context.Background()
	f := soldOutWithALostOrder(t)
	if put, err := f.gate.PutBack(ctx, voucher.Redemption{VoucherCode: "F", CustomerID: "c1", OrderID: "o1", ReservedAt: f.clock.Now()}); err != nil || !put {
		t.Fatalf("put back: %v %v", put, err)
	}
	n := f.note.count()
	f.warm(t, "F") // the admin's warm-up of a loaded voucher, 1 use below zero
	if remaining, _ := f.gate.state("F", ""); remaining != -1 {
		t.Fatalf("remaining %d; want -1", remaining)
	}
	if told := f.note.since(n); !slices.Equal(told, []string{"sold out F"}) {
		t.Errorf("told the edges %q with no use left; want sold out", told)
	}
}

// A failover lost o1's take, and another customer's attempt took the orderId o1 in the gate
// and died: the order is held, but not for the customer whose row it is. Reconciliation makes
// it that row's, in the same use, so c1's retry is answered from its row, not refused as
// another customer's order.
func TestReconcileMakesAnOrderHeldForAnotherCustomerItsRows(t *testing.T) {
	ctx := context.Background()
	f := newFakeEnv(voucher.Config{})
	f.create(t, "F", 2, 1, true)
	granted := f.mustReserve(t, "F", "c1", "o1")
	f.gate.lose("F", "o1")
	f.hang(t, "F", "c9", "o1")
	f.clock.Advance(2 * time.Minute)
	rep, err := f.svc.Reconcile(ctx, "F", voucher.ReconcileConfig{Grace: time.Minute})
	if err != nil || !slices.Equal(rep.PutBack, []string{"o1"}) || len(rep.Released) != 0 || rep.RemainingAfter != 1 {
		t.Fatalf("reconcile: %+v %v; want o1 put back for c1, nothing released, 1 use left", rep, err)
	}
	if h, held, err := f.gate.Holding(ctx, "F", "o1"); err != nil || !held || h.CustomerID != "c1" {
		t.Errorf("o1 held by %+v (%v %v); want c1", h, held, err)
	}
	if r, err := f.reserve("F", "c1", "o1"); err != nil || r.DiscountAmount != granted.DiscountAmount || r.CustomerID != "c1" {
		t.Errorf("c1's retry: %+v %v; want the same 201", r, err)
	}
	f.check(t, "F", "o1")
}
