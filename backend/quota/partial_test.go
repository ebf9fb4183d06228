package quota_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest/history"
	"vouchergate/backend/quota"
)

// given sums what a rollback gave back, by "TYPE:identity dimension window".
func given(res quota.RollbackResult) map[string]int64 {
	out := map[string]int64{}
	for _, r := range res.Returned {
		out[r.IdentityType+":"+r.Identity+" "+r.Dimension+" "+r.Window.ID()] += r.Amount
	}
	return out
}

// A partial rollback gives back up to its amount on the counters its item's dimensions name
// (and "*"), once per rollbackKey; the sum never passes what was taken, and a whole rollback
// after partial ones gives back the rest. Calendar and rolling counters alike.
func TestPartialRollback(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
		day, roll := calendar(t, quota.Day, "UTC"), rolling(t, time.Hour)
		e.rule(t, 1, "USER", "ITEM:*", 10, day)
		e.rule(t, 1, "USER", "TYPE:GAME", 10, roll)
		e.rule(t, 1, "USER", "*", 10, day)
		rec := history.For(t)
		// order-1: 3 of ITEM:1 (a game) and 2 of ITEM:2
		if _, err := deductIn(rec, e.svc, 1, "order-1", item("USER", "u", 3, "ITEM:1", "TYPE:GAME"), item("USER", "u", 2, "ITEM:2")); err != nil {
			t.Fatal(err)
		}
		check := func(what string, item1, game, star int64) {
			t.Helper()
			if got := [3]int64{e.used(t, 1, "USER", "u", "ITEM:1", day), e.used(t, 1, "USER", "u", "TYPE:GAME", roll),
				e.used(t, 1, "USER", "u", "*", day)}; got != [3]int64{item1, game, star} {
				t.Fatalf("%s: ITEM:1, TYPE:GAME, * at %v; want %v", what, got, [3]int64{item1, game, star})
			}
		}
		check("deducted", 3, 3, 5)

		// refund 1 of the 3 games
		refund := []quota.Item{item("USER", "u", 1, "ITEM:1", "TYPE:GAME")}
		res, err := partialIn(rec, e.svc, 1, "order-1", "refund-1", refund...)
		want := map[string]int64{"USER:u ITEM:1 DAY/UTC": 1, "USER:u TYPE:GAME ROLLING/3600000": 1, "USER:u * DAY/UTC": 1}
		if err != nil || fmt.Sprint(given(res)) != fmt.Sprint(want) {
			t.Fatalf("refund 1: %+v %v; want %v", res, err, want)
		}
		check("refunded 1", 2, 2, 4)
		// the same rollbackKey again: the same answer, nothing changed
		again, err := partialIn(rec, e.svc, 1, "order-1", "refund-1", refund...)
		if err != nil || fmt.Sprint(given(again)) != fmt.Sprint(want) {
			t.Fatalf("refund-1 again: %+v %v; want the first answer %v", again, err, want)
		}
		check("refund-1 again", 2, 2, 4)
		if _, err := partialIn(rec, e.svc, 1, "order-1", "refund-1", item("USER", "u", 2, "ITEM:1", "TYPE:GAME")); !errors.Is(err, quota.ErrRollbackKeyReused) {
			t.Fatalf("refund-1 with other items: %v; want ErrRollbackKeyReused", err)
		}
		// asking 5 more of ITEM:1 gives back the 2 left of it, and only on its counters
		res, err = partialIn(rec, e.svc, 1, "order-1", "refund-2", item("USER", "u", 5, "ITEM:1"))
		if want := map[string]int64{"USER:u ITEM:1 DAY/UTC": 2, "USER:u * DAY/UTC": 2}; err != nil || fmt.Sprint(given(res)) != fmt.Sprint(want) {
			t.Fatalf("refund 5 of ITEM:1: %+v %v; want %v", res, err, want)
		}
		check("refunded ITEM:1 fully", 0, 2, 2)
		// the whole rollback gives back the rest: the 2 games of the rolling counter and ITEM:2's 2
		res, err = rollbackIn(rec, e.svc, 1, "order-1")
		if want := map[string]int64{"USER:u TYPE:GAME ROLLING/3600000": 2, "USER:u * DAY/UTC": 2, "USER:u ITEM:2 DAY/UTC": 2}; err != nil ||
			fmt.Sprint(given(res)) != fmt.Sprint(want) {
			t.Fatalf("whole rollback after partials: %+v %v; want %v", res, err, want)
		}
		check("rolled back", 0, 0, 0)
		if got := e.used(t, 1, "USER", "u", "ITEM:2", day); got != 0 {
			t.Fatalf("ITEM:2 at %d", got)
		}
		// after the whole rollback a new partial gives back nothing; an earlier one still replays
		if res, err := partialIn(rec, e.svc, 1, "order-1", "refund-3", refund...); err != nil || len(res.Returned) != 0 {
			t.Fatalf("partial after the whole rollback: %+v %v", res, err)
		}
		if res, err := partialIn(rec, e.svc, 1, "order-1", "refund-1", refund...); err != nil || len(res.Returned) != 3 {
			t.Fatalf("refund-1 after the whole rollback: %+v %v; want its first answer", res, err)
		}
		// an item that only "*" counts is held to what the deduct left on "*" (the record keeps
		// counters, not items): asking more than it bought takes the step's other items' share
		// of "*", never more than the step took there, and the whole rollback gives back the rest
		if _, err := deductIn(rec, e.svc, 1, "order-2", item("USER", "u", 2, "TYPE:BOOK"), item("USER", "u", 1, "ITEM:7")); err != nil {
			t.Fatal(err)
		}
		if _, err := deductIn(rec, e.svc, 1, "order-3", item("USER", "u", 1, "ITEM:8")); err != nil {
			t.Fatal(err)
		}
		res, err = partialIn(rec, e.svc, 1, "order-2", "refund-book", item("USER", "u", 5, "TYPE:BOOK"))
		if want := map[string]int64{"USER:u * DAY/UTC": 3}; err != nil || fmt.Sprint(given(res)) != fmt.Sprint(want) {
			t.Fatalf("refund 5 of an item only \"*\" counts: %+v %v; want the 3 the step took on \"*\"", res, err)
		}
		res, err = rollbackIn(rec, e.svc, 1, "order-2")
		if want := map[string]int64{"USER:u ITEM:7 DAY/UTC": 1}; err != nil || fmt.Sprint(given(res)) != fmt.Sprint(want) {
			t.Fatalf("the whole rollback after it: %+v %v; want ITEM:7's 1, nothing more on \"*\"", res, err)
		}
		if got := e.used(t, 1, "USER", "u", "*", day); got != 1 {
			t.Fatalf("* at %d; want order-3's 1", got)
		}
		// an idemKey never deducted: nothing, and the rollbackKey keeps that answer
		if res, err := partialIn(rec, e.svc, 1, "never", "r", refund...); err != nil || len(res.Returned) != 0 {
			t.Fatalf("unknown idemKey: %+v %v", res, err)
		}
		if _, err := deductIn(rec, e.svc, 1, "never", refund...); err != nil {
			t.Fatal(err)
		}
		if res, err := partialIn(rec, e.svc, 1, "never", "r", refund...); err != nil || len(res.Returned) != 0 {
			t.Fatalf("the rollbackKey that found nothing, sent again after the deduct: %+v %v; want its first answer, nothing", res, err)
		}
	})
}

// Partial rollbacks of one deduct of two identities, sent at once from two backends, and a
// whole rollback racing them: together they give back exactly what the deduct took on each
// counter, never more, whatever their order; each counter in Redis ends at what other deducts
// hold. Each rollbackKey's answer is what it gave back, and repeating it changes nothing.
func TestPartialRollbacksRaceOnTwoBackends(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
		other := e.start(t, e.cfg)
		backends := []*quota.Service{e.svc, other}
		day, roll := calendar(t, quota.Day, "UTC"), rolling(t, time.Hour)
		for _, typ := range []string{"USER", "DEVICE"} {
			e.rule(t, 1, typ, "ITEM:1", 1000, day)
			e.rule(t, 1, typ, "ITEM:1", 1000, roll)
		}
		other.Close()
		other = e.start(t, e.cfg) // reads the rules
		backends[1] = other
		rec := history.For(t)
		const taken = 12
		items := []quota.Item{item("USER", "u", taken, "ITEM:1"), item("DEVICE", "d", taken, "ITEM:1")}
		if _, err := deductIn(rec, e.svc, 1, "big", items...); err != nil {
			t.Fatal(err)
		}
		// another deduct on the same counters, which no rollback of "big" may touch
		if _, err := deductIn(rec, e.svc, 1, "other", item("USER", "u", 5, "ITEM:1"), item("DEVICE", "d", 5, "ITEM:1")); err != nil {
			t.Fatal(err)
		}

		for round, whole := range []bool{false, true} {
			key := fmt.Sprintf("round-%d", round)
			if round > 0 {
				if _, err := deductIn(rec, e.svc, 1, key, items...); err != nil {
					t.Fatal(err)
				}
			} else {
				key = "big"
			}
			const n = 40 // partial rollbacks of 1 each: more than the 12 taken
			results := make([]quota.RollbackResult, n+1)
			errs := make([]error, n+1)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					results[i], errs[i] = partialIn(rec, backends[i%2], 1, key, fmt.Sprintf("p-%d", i),
						item("USER", "u", 1, "ITEM:1"), item("DEVICE", "d", 1, "ITEM:1"))
				})
			}
			if whole {
				wg.Go(func() { results[n], errs[n] = rollbackIn(rec, backends[1], 1, key) })
			}
			wg.Wait()
			sum := map[string]int64{}
			for i := range results {
				if errs[i] != nil {
					t.Fatalf("round %d, rollback %d: %v", round, i, errs[i])
				}
				for k, v := range given(results[i]) {
					sum[k] += v
				}
			}
			for _, typ := range []string{"USER:u", "DEVICE:d"} {
				for _, w := range []string{"DAY/UTC", "ROLLING/3600000"} {
					if got := sum[typ+" ITEM:1 "+w]; got != taken {
						t.Fatalf("round %d (whole rollback racing: %v): %s %s given back %d in all; want exactly the %d taken", round, whole, typ, w, got, taken)
					}
				}
			}
			for _, id := range [][2]string{{"USER", "u"}, {"DEVICE", "d"}} {
				if got := [2]int64{e.used(t, 1, id[0], id[1], "ITEM:1", day), e.used(t, 1, id[0], id[1], "ITEM:1", roll)}; got != [2]int64{5, 5} {
					t.Fatalf("round %d: %s's counters at %v; want the other deduct's 5 each", round, id[0], got)
				}
			}
			// every rollbackKey again, on the other backend: its answer, nothing changed
			for i := range n {
				again, err := partialIn(rec, backends[(i+1)%2], 1, key, fmt.Sprintf("p-%d", i),
					item("USER", "u", 1, "ITEM:1"), item("DEVICE", "d", 1, "ITEM:1"))
				if err != nil || fmt.Sprint(given(again)) != fmt.Sprint(given(results[i])) {
					t.Fatalf("round %d, p-%d again: %+v %v; first %+v", round, i, again, err, results[i])
				}
			}
			if res, err := rollbackIn(rec, e.svc, 1, key); err != nil || len(res.Returned) != 0 {
				t.Fatalf("round %d: a whole rollback after everything was given back: %+v %v", round, res, err)
			}
			for _, id := range [][2]string{{"USER", "u"}, {"DEVICE", "d"}} {
				if got := e.used(t, 1, id[0], id[1], "ITEM:1", day); got != 5 {
					t.Fatalf("round %d: %s at %d after all rollbacks; want 5", round, id[0], got)
				}
			}
		}
	})
}

// A shopper's partial rollback finds only its own idemKeys: another shopper's, or a service's,
// deduct of the same idemKey is not touched.
func TestPartialRollbackInTheCallersScope(t *testing.T) {
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC))
	day := calendar(t, quota.Day, "UTC")
	e.rule(t, 1, "USER", "ITEM:1", 10, day)
	ctx := t.Context()
	for _, who := range []string{"", "s1", "s2"} {
		if _, err := e.svc.As(who).Deduct(ctx, 1, "k", []quota.Item{item("USER", "u"+who, 3, "ITEM:1")}); err != nil {
			t.Fatal(err)
		}
	}
	// s2 names s1's identity: its own idemKey "k" took nothing from it
	if res, err := e.svc.As("s2").RollbackItems(ctx, 1, "k", "r", []quota.Item{item("USER", "us1", 1, "ITEM:1")}); err != nil || len(res.Returned) != 0 {
		t.Fatalf("s2 rolling back s1's identity under its own idemKey: %+v %v", res, err)
	}
	if res, err := e.svc.As("s1").RollbackItems(ctx, 1, "k", "r", []quota.Item{item("USER", "us1", 1, "ITEM:1")}); err != nil || len(res.Returned) != 1 {
		t.Fatalf("s1's own: %+v %v", res, err)
	}
	for who, want := range map[string]int64{"": 3, "s1": 2, "s2": 3} {
		if got := e.used(t, 1, "USER", "u"+who, "ITEM:1", day); got != want {
			t.Errorf("%q's counter at %d; want %d", who, got, want)
		}
	}
}

// A rollbackKey acts once per idemKey, whatever identities its items name: reused for another
// identity of the same deduct, or for a part of its first items, it is ErrRollbackKeyReused and
// gives back nothing; sent again with its very items it answers its first answer, saying it is
// a replay.
func TestRollbackKeyActsOncePerIdemKey(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
		day := calendar(t, quota.Day, "UTC")
		for _, typ := range []string{"USER", "DEVICE"} {
			e.rule(t, 1, typ, "ITEM:1", 10, day)
		}
		ctx := t.Context()
		if _, err := e.deduct(1, "order", item("USER", "u", 3, "ITEM:1"), item("DEVICE", "d", 3, "ITEM:1")); err != nil {
			t.Fatal(err)
		}
		user, device := item("USER", "u", 1, "ITEM:1"), item("DEVICE", "d", 1, "ITEM:1")
		first, err := e.svc.RollbackItems(ctx, 1, "order", "refund", []quota.Item{user})
		if err != nil || len(first.Returned) != 1 || first.Replayed {
			t.Fatalf("refund of the user's 1: %+v %v", first, err)
		}
		if _, err := e.svc.RollbackItems(ctx, 1, "order", "refund", []quota.Item{device}); !errors.Is(err, quota.ErrRollbackKeyReused) {
			t.Fatalf("the same rollbackKey for the device: %v; want ErrRollbackKeyReused", err)
		}
		again, err := e.svc.RollbackItems(ctx, 1, "order", "refund", []quota.Item{user})
		if err != nil || !again.Replayed || fmt.Sprint(given(again)) != fmt.Sprint(given(first)) {
			t.Fatalf("the same refund again: %+v %v; want the first answer %+v, replayed", again, err, first)
		}
		both, err := e.svc.RollbackItems(ctx, 1, "order", "refund-both", []quota.Item{device, user})
		if err != nil || len(both.Returned) != 2 || both.Replayed {
			t.Fatalf("refund of one each: %+v %v", both, err)
		}
		if _, err := e.svc.RollbackItems(ctx, 1, "order", "refund-both", []quota.Item{user}); !errors.Is(err, quota.ErrRollbackKeyReused) {
			t.Fatalf("a rollbackKey of two identities sent again for one of them: %v; want ErrRollbackKeyReused", err)
		}
		// the items in another order are the same items
		if res, err := e.svc.RollbackItems(ctx, 1, "order", "refund-both", []quota.Item{user, device}); err != nil || !res.Replayed ||
			fmt.Sprint(given(res)) != fmt.Sprint(given(both)) {
			t.Fatalf("refund-both again, its items in another order: %+v %v; want its first answer, replayed", res, err)
		}
		for typ, id := range map[string]string{"USER": "u", "DEVICE": "d"} {
			if got, want := e.used(t, 1, typ, id, "ITEM:1", day), map[string]int64{"USER": 1, "DEVICE": 2}[typ]; got != want {
				t.Errorf("%s at %d; want %d", typ, got, want)
			}
		}
	})
}

// Partial rollbacks whose sum stays under what was taken, sent at once from two backends, give
// back exactly their sum: 5 of 1 each of the 12 taken leave 7.
func TestPartialRollbacksUnderTheCapRaceOnTwoBackends(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
		day, roll := calendar(t, quota.Day, "UTC"), rolling(t, time.Hour)
		for _, typ := range []string{"USER", "DEVICE"} {
			e.rule(t, 1, typ, "ITEM:1", 1000, day)
			e.rule(t, 1, typ, "ITEM:1", 1000, roll)
		}
		other := e.start(t, e.cfg) // reads the rules
		backends := []*quota.Service{e.svc, other}
		const taken, n = 12, 5
		if _, err := e.deduct(1, "big", item("USER", "u", taken, "ITEM:1"), item("DEVICE", "d", taken, "ITEM:1")); err != nil {
			t.Fatal(err)
		}
		results := make([]quota.RollbackResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				results[i], errs[i] = backends[i%2].RollbackItems(t.Context(), 1, "big", fmt.Sprintf("p-%d", i),
					[]quota.Item{item("USER", "u", 1, "ITEM:1"), item("DEVICE", "d", 1, "ITEM:1")})
			})
		}
		wg.Wait()
		sum := map[string]int64{}
		for i := range results {
			if errs[i] != nil {
				t.Fatalf("rollback %d: %v", i, errs[i])
			}
			for k, v := range given(results[i]) {
				if v != 1 {
					t.Errorf("p-%d gave back %d on %s; want its 1", i, v, k)
				}
				sum[k] += v
			}
		}
		for _, id := range [][2]string{{"USER", "u"}, {"DEVICE", "d"}} {
			for _, w := range []quota.Window{day, roll} {
				if got := sum[id[0]+":"+id[1]+" ITEM:1 "+w.ID()]; got != n {
					t.Errorf("%s %s given back %d in all; want exactly the %d asked", id[0], w.ID(), got, n)
				}
				if got := e.used(t, 1, id[0], id[1], "ITEM:1", w); got != taken-n {
					t.Errorf("%s %s at %d; want %d", id[0], w.ID(), got, taken-n)
				}
			}
		}
	})
}
