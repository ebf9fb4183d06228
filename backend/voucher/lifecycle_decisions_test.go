package voucher_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// Confirm and release: idempotent, each refusing the other's outcome, and telling an unknown
// voucher from an unknown reservation. A flash release gives the use back to the gate after the
// database, telling the edges when that ends a sell-out; a repeated release gives back nothing.
func TestConfirmAndReleaseDecisions(t *testing.T) {
	ctx := context.Background()
	confirm := func(f *fakeEnv, code, order string) (voucher.Redemption, error) {
		return f.svc.Confirm(ctx, code, order)
	}
	release := func(f *fakeEnv, code, order string) (voucher.Redemption, error) {
		return f.svc.Release(ctx, code, order)
	}
	cases := []struct {
		name      string
		before    func(t *testing.T, f *fakeEnv) // o1 of c1 is reserved on F (1 use), o2 of c2 on N (2 uses)
		do        func(f *fakeEnv, code, order string) (voucher.Redemption, error)
		code      string // F unless set
		order     string // o1 unless set
		want      error
		status    string   // the answer's status
		granted   []string // orders still active at the end
		remaining int64    // F's uses left in the gate at the end
		told      []string
	}{
		{name: "confirm", do: confirm, status: wire.StatusConfirmed, granted: []string{"o1", "o2"}},
		{name: "confirm again", do: confirm, status: wire.StatusConfirmed, granted: []string{"o1", "o2"},
			before: func(t *testing.T, f *fakeEnv) { mustDo(t, confirm, f, "F", "o1") }},
		{name: "confirm a released reservation", do: confirm, want: voucher.ErrReleased, granted: []string{"o2"}, remaining: 1,
			before: func(t *testing.T, f *fakeEnv) { mustDo(t, release, f, "F", "o1") }},
		{name: "confirm an unknown order", do: confirm, order: "o9", want: voucher.ErrReservationNotFound, granted: []string{"o1", "o2"}},
		{name: "confirm an order of another voucher", do: confirm, order: "o2", want: voucher.ErrReservationNotFound, granted: []string{"o1", "o2"}},
		{name: "confirm on an unknown voucher", do: confirm, code: "NOPE", want: voucher.ErrVoucherNotFound, granted: []string{"o1", "o2"}},
		{name: "confirm when the store does not answer", do: confirm, want: voucher.ErrUnavailable, granted: []string{"o1", "o2"},
			before: func(t *testing.T, f *fakeEnv) { f.store.arm("Confirm", fault{err: errTimeout}) }},
		{name: "release a sold-out flash voucher's reservation: back in stock", do: release, status: wire.StatusReleased,
			granted: []string{"o2"}, remaining: 1, told: []string{"back in stock F"}},
		{name: "release again: nothing more given back or told", do: release, status: wire.StatusReleased, granted: []string{"o2"}, remaining: 1,
			before: func(t *testing.T, f *fakeEnv) { mustDo(t, release, f, "F", "o1") }},
		{name: "release a normal voucher's reservation: the gate is not asked", do: release, code: "N", order: "o2",
			status: wire.StatusReleased, granted: []string{"o1"},
			before: func(t *testing.T, f *fakeEnv) {
				f.gate.hook = func(op, _ string) { t.Errorf("the gate was asked (%s) about a normal voucher", op) }
			}},
		{name: "release a confirmed reservation", do: release, want: voucher.ErrConfirmed, granted: []string{"o1", "o2"},
			before: func(t *testing.T, f *fakeEnv) { mustDo(t, confirm, f, "F", "o1") }},
		{name: "release an unknown order", do: release, order: "o9", want: voucher.ErrReservationNotFound, granted: []string{"o1", "o2"}},
		{name: "release on an unknown voucher", do: release, code: "NOPE", want: voucher.ErrVoucherNotFound, granted: []string{"o1", "o2"}},
		{name: "release when the store does not answer: nothing given back", do: release, want: voucher.ErrUnavailable,
			granted: []string{"o1", "o2"},
			before:  func(t *testing.T, f *fakeEnv) { f.store.arm("Release", fault{err: errTimeout}) }},
		{name: "release when the gate does not answer: released, the use left for the reconciler", do: release,
			status: wire.StatusReleased, granted: []string{"o2"},
			before: func(t *testing.T, f *fakeEnv) { f.gate.arm("Release", fault{err: errTimeout}) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeEnv(voucher.Config{})
			f.create(t, "F", 1, 1, true)
			f.create(t, "N", 2, 1, false)
			f.mustReserve(t, "F", "c1", "o1")
			f.mustReserve(t, "N", "c2", "o2")
			if c.before != nil {
				c.before(t, f)
			}
			n := f.note.count()
			code, order := or(c.code, "F"), or(c.order, "o1")
			r, err := c.do(f, code, order)
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("answered %v; want %s", err, c.status)
			case c.want == nil && (r.Status != c.status || r.OrderID != order):
				t.Errorf("answered %+v; want %s %s", r, order, c.status)
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("answered %+v %v; want %v", r, err, c.want)
			}
			if remaining, _ := f.gate.state("F", ""); remaining != c.remaining {
				t.Errorf("the gate has %d uses of F left; want %d", remaining, c.remaining)
			}
			if told := f.note.since(n); !slices.Equal(told, c.told) {
				t.Errorf("told the edges %q; want %q", told, c.told)
			}
			f.check(t, "F", slices.DeleteFunc(slices.Clone(c.granted), func(o string) bool { return o != "o1" })...)
			f.check(t, "N", slices.DeleteFunc(slices.Clone(c.granted), func(o string) bool { return o != "o2" })...)
		})
	}
}

func mustDo(t *testing.T, do func(f *fakeEnv, code, order string) (voucher.Redemption, error), f *fakeEnv, code, order string) {
	t.Helper()
	if _, err := do(f, code, order); err != nil {
		t.Fatal(err)
	}
}

// A release while other uses are left tells the edges nothing; the release that ends a
// sell-out tells them once.
func TestReleaseTellsBackInStockOnlyWhenItEndsASellOut(t *testing.T) {
	ctx := context.Background()
	f := newFakeEnv(voucher.Config{})
	f.create(t, "F", 3, 1, true)
	for _, o := range []string{"o1", "o2", "o3"} {
		f.mustReserve(t, "F", "c"+o[1:], o)
	}
	n := f.note.count()
	for _, o := range []string{"o1", "o2", "o1"} {
		if _, err := f.svc.Release(ctx, "F", o); err != nil {
			t.Fatal(err)
		}
	}
	if told := f.note.since(n); !slices.Equal(told, []string{"back in stock F"}) {
		t.Errorf("three releases (one repeated) from sold out told the edges %q; want back in stock once", told)
	}
	f.check(t, "F", "o3")
}

// Holds not confirmed within HoldTTL (on the service's clock) are released in the database,
// then in the gate for flash vouchers, telling the edges when that ends a sell-out; confirmed
// and younger holds stay; running it again releases nothing.
func TestExpireHoldsDecisions(t *testing.T) {
	ctx := context.Background()
	f := newFakeEnv(voucher.Config{HoldTTL: 10 * time.Minute})
	f.create(t, "F", 3, 1, true)
	f.create(t, "N", 3, 1, false)
	f.mustReserve(t, "F", "c1", "o1") // expires first
	f.mustReserve(t, "F", "c2", "o2") // confirmed
	f.mustReserve(t, "N", "c1", "n1") // expires first
	if _, err := f.svc.Confirm(ctx, "F", "o2"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(5 * time.Minute)
	f.mustReserve(t, "F", "c3", "o3") // younger; the voucher is sold out
	n := f.note.count()

	f.clock.Advance(5*time.Minute + time.Second)
	if got, err := f.svc.ExpireHolds(ctx); err != nil || got != 2 {
		t.Fatalf("expired %d (%v); want o1 and n1", got, err)
	}
	for order, status := range map[string]string{"o1": wire.StatusReleased, "n1": wire.StatusReleased,
		"o2": wire.StatusConfirmed, "o3": wire.StatusReserved} {
		if r, _ := f.store.row(order); r.Status != status {
			t.Errorf("%s is %s; want %s", order, r.Status, status)
		}
	}
	if remaining, held := f.gate.state("F", "o1"); held || remaining != 1 {
		t.Errorf("gate: o1 held %v, %d left; want o1 given back, 1 left", held, remaining)
	}
	if told := f.note.since(n); !slices.Equal(told, []string{"back in stock F"}) {
		t.Errorf("told the edges %q; want back in stock once", told)
	}
	if got, err := f.svc.ExpireHolds(ctx); err != nil || got != 0 {
		t.Errorf("expired again %d (%v); want 0", got, err)
	}
	f.check(t, "F", "o2", "o3")
	f.check(t, "N")

	f.clock.Advance(5 * time.Minute)
	if got, err := f.svc.ExpireHolds(ctx); err != nil || got != 1 {
		t.Errorf("expired %d (%v) once o3's hold ran out; want 1", got, err)
	}
	f.check(t, "F", "o2")
}

// More expired holds than one round releases (500) are all released, round after round; a
// store failure answers what was released before it with the error.
func TestExpireHoldsInRounds(t *testing.T) {
	ctx := context.Background()
	f := newFakeEnv(voucher.Config{HoldTTL: time.Minute})
	f.create(t, "N", 1201, 1, false)
	for i := range 1201 {
		f.commit(t, "N", "c"+strconv.Itoa(i), "o"+strconv.Itoa(i))
	}
	f.clock.Advance(2 * time.Minute)
	var seen calls
	f.store.hook = func(op string, _ []string) { seen.add(op) }
	if got, err := f.svc.ExpireHolds(ctx); err != nil || got != 1201 {
		t.Fatalf("expired %d (%v); want 1201", got, err)
	}
	if seen.count("ExpireHolds") != 3 {
		t.Errorf("%d rounds; want 3 (500, 500, 201)", seen.count("ExpireHolds"))
	}
	f.check(t, "N")

	f.store.arm("ExpireHolds", fault{err: errTimeout})
	if _, err := f.svc.ExpireHolds(ctx); !errors.Is(err, errTimeout) {
		t.Errorf("expire with the store down: %v; want its error", err)
	}
}
