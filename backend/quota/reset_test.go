package quota_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/quota"
)

// A reset sets an identity's counters in their current windows to zero (all of them: exact,
// "*", a wildcard's per item, rolling; or one dimension's), is recorded with what it cleared, and
// forgives what was counted before it: a rollback or partial rollback of an earlier deduct gives
// back nothing on the reset counters (it would let the identity buy past its limit), while one
// of a deduct after the reset gives back as ever. Other identities are not touched.
func TestResetCounters(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
		day, roll := calendar(t, quota.Day, "UTC"), rolling(t, time.Hour)
		e.rule(t, 1, "USER", "ITEM:*", 3, day)
		e.rule(t, 1, "USER", "TYPE:GAME", 3, roll)
		e.rule(t, 1, "USER", "*", 5, day)
		ctx := t.Context()
		buy := func(key, who string, amount int64, dims ...string) error {
			_, err := e.deduct(1, key, item("USER", who, amount, dims...))
			return err
		}
		for _, b := range []struct {
			key  string
			n    int64
			dims []string
		}{{"a", 3, []string{"ITEM:1", "TYPE:GAME"}}, {"b", 2, []string{"ITEM:2"}}} {
			if err := buy(b.key, "u", b.n, b.dims...); err != nil {
				t.Fatal(err)
			}
		}
		if err := buy("other", "v", 2, "ITEM:1"); err != nil {
			t.Fatal(err)
		}
		if err := buy("c", "u", 1, "ITEM:3"); !errors.Is(err, quota.ErrQuotaExceeded) {
			t.Fatalf("a sixth item: %v; want refused by \"*\" at 5", err)
		}

		// one dimension: ITEM:1 only
		r, err := e.svc.ResetCounters(ctx, 1, "USER", "u", "ITEM:1")
		if err != nil || r.Outcome != quota.ResetDone || len(r.Cleared) != 1 || r.Cleared[0].Dimension != "ITEM:1" || r.Cleared[0].Used != 3 {
			t.Fatalf("reset ITEM:1: %+v %v; want ITEM:1's 3 cleared", r, err)
		}
		if got := e.used(t, 1, "USER", "u", "ITEM:1", day); got != 0 {
			t.Fatalf("ITEM:1 at %d after its reset", got)
		}
		if got := e.used(t, 1, "USER", "u", "*", day); got != 5 {
			t.Fatalf("* at %d after ITEM:1's reset; want 5 untouched", got)
		}
		// everything
		r, err = e.svc.ResetCounters(ctx, 1, "USER", "u", "")
		if err != nil || r.Outcome != quota.ResetDone {
			t.Fatalf("reset all: %+v %v", r, err)
		}
		cleared := map[string]int64{}
		for _, c := range r.Cleared {
			cleared[c.Dimension+" "+c.Window.ID()] = c.Used
		}
		if want := map[string]int64{"* DAY/UTC": 5, "ITEM:2 DAY/UTC": 2, "TYPE:GAME ROLLING/3600000": 3}; len(cleared) != len(want) ||
			cleared["* DAY/UTC"] != 5 || cleared["ITEM:2 DAY/UTC"] != 2 || cleared["TYPE:GAME ROLLING/3600000"] != 3 {
			t.Fatalf("reset all cleared %v; want %v", cleared, want)
		}
		cs, err := e.svc.Usage(ctx, 1, "USER", "u", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Used != 0 {
				t.Fatalf("after the reset, usage lists %+v", c)
			}
		}
		if got := e.used(t, 1, "USER", "v", "ITEM:1", day); got != 2 {
			t.Fatalf("another identity at %d after u's reset; want 2", got)
		}

		// deducts after the reset count from zero; rollbacks of earlier ones give back nothing
		if err := buy("d", "u", 2, "ITEM:1", "TYPE:GAME"); err != nil {
			t.Fatal(err)
		}
		if res, err := e.svc.Rollback(ctx, 1, "a"); err != nil || len(res.Returned) != 0 {
			t.Fatalf("rollback of a deduct before the reset: %+v %v; want nothing given back", res, err)
		}
		if res, err := e.svc.RollbackItems(ctx, 1, "b", "refund", []quota.Item{item("USER", "u", 1, "ITEM:2")}); err != nil || len(res.Returned) != 0 {
			t.Fatalf("partial rollback of a deduct before the reset: %+v %v; want nothing given back", res, err)
		}
		for _, c := range []struct {
			dim  string
			w    quota.Window
			want int64
		}{{"ITEM:1", day, 2}, {"TYPE:GAME", roll, 2}, {"*", day, 2}} {
			if got := e.used(t, 1, "USER", "u", c.dim, c.w); got != c.want {
				t.Fatalf("%s at %d; want the new deduct's %d", c.dim, got, c.want)
			}
		}
		if res, err := e.svc.Rollback(ctx, 1, "d"); err != nil || len(res.Returned) != 3 {
			t.Fatalf("rollback of the deduct after the reset: %+v %v; want its three counters", res, err)
		}

		list, err := e.svc.Resets(ctx, 1, "USER", "u", 10)
		if err != nil || len(list) != 2 || list[0].Dimension != "" || list[1].Dimension != "ITEM:1" || list[0].Outcome != quota.ResetDone ||
			len(list[0].Cleared) != 3 || !list[0].ResetAt.Equal(e.clock.Now()) {
			t.Fatalf("resets: %+v %v; want both, newest first, with what they cleared", list, err)
		}
		if list, err := e.svc.Resets(ctx, 1, "USER", "v", 10); err != nil || len(list) != 0 {
			t.Fatalf("v's resets: %+v %v", list, err)
		}
		if _, err := e.svc.ResetCounters(ctx, 1, "USER", "u", "ITEM"); !errors.Is(err, quota.ErrInvalid) {
			t.Fatalf("a bad dimension: %v", err)
		}
	})
}

// A reset of every counter clears every wildcard counter the identity counts in its window,
// past the 256 that usage lists: 300 items bought, 300 counters cleared, in batches.
func TestResetClearsEveryWildcardCounter(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
		day := calendar(t, quota.Day, "UTC")
		e.rule(t, 1, "USER", "ITEM:*", 5, day)
		const items, perDeduct = 300, 16
		for from := 0; from < items; from += perDeduct {
			var its []quota.Item
			for i := from; i < min(from+perDeduct, items); i++ {
				its = append(its, item("USER", "u", 1, fmt.Sprintf("ITEM:%d", i)))
			}
			if _, err := e.deduct(1, fmt.Sprintf("order-%d", from), its...); err != nil {
				t.Fatal(err)
			}
		}
		r, err := e.svc.ResetCounters(t.Context(), 1, "USER", "u", "")
		if err != nil || r.Outcome != quota.ResetDone || len(r.Cleared) != items {
			t.Fatalf("reset of every counter: %v, %d cleared; want all %d", err, len(r.Cleared), items)
		}
		for i := range items {
			if got := e.used(t, 1, "USER", "u", fmt.Sprintf("ITEM:%d", i), day); got != 0 {
				t.Fatalf("ITEM:%d at %d after the reset of every counter", i, got)
			}
		}
	})
}
