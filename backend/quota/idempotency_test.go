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

// Retries of one idemKey, sequential and concurrent, count once and all get the first answer.
func TestRetriesCountOnce(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) { retriesCountOnce(t, rdb) })
}

func retriesCountOnce(t *testing.T, rdb redis.UniversalClient) {
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
	day := calendar(t, quota.Day, "UTC")
	roll := rolling(t, time.Hour)
	e.rule(t, 1, "USER", "ITEM:*", 5, day)
	e.rule(t, 1, "USER", "TYPE:GAME", 5, roll)
	it := item("USER", "u", 2, "ITEM:1", "TYPE:GAME")
	rec := history.For(t)

	const n = 30
	results := make([]quota.DeductResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = deductIn(rec, e.svc, 1, "order-1", it) })
	}
	wg.Wait()
	if st := e.svc.Metrics(); st.Taken != n || st.Replayed != n-1 {
		t.Fatalf("metrics %+v; want %d taken, %d of them replays", st, n, n-1)
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("duplicate %d: %v", i, errs[i])
		}
		if !sameCounters(results[i], results[0]) {
			t.Fatalf("duplicate %d answered %+v; the first %+v", i, results[i], results[0])
		}
	}
	if got := e.used(t, 1, "USER", "u", "ITEM:1", day); got != 2 {
		t.Fatalf("day counter %d after %d duplicates; want 2", got, n)
	}
	if got := e.used(t, 1, "USER", "u", "TYPE:GAME", roll); got != 2 {
		t.Fatalf("rolling counter %d after %d duplicates; want 2", got, n)
	}
	// a later retry, after others bought, still gets the first answer
	if _, err := deductIn(rec, e.svc, 1, "order-2", item("USER", "u", 1, "ITEM:1", "TYPE:GAME")); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	again, err := deductIn(rec, e.svc, 1, "order-1", item("USER", "u", 2, "TYPE:GAME", "ITEM:1")) // dimensions reordered
	if err != nil || !sameCounters(again, results[0]) {
		t.Fatalf("late retry: %+v %v; want the first answer %+v", again, err, results[0])
	}
	for _, c := range again.Counters {
		if c.Used != 2 {
			t.Fatalf("late retry says used %d; the first answer said 2", c.Used)
		}
	}
	// the same key with other items is refused and changes nothing
	if _, err := deductIn(rec, e.svc, 1, "order-1", item("USER", "u", 1, "ITEM:1", "TYPE:GAME")); !errors.Is(err, quota.ErrIdemKeyReused) {
		t.Fatalf("reuse with another amount: %v; want ErrIdemKeyReused", err)
	}
	if got := e.used(t, 1, "USER", "u", "ITEM:1", day); got != 3 {
		t.Fatalf("day counter %d; want 3", got)
	}
}

func sameCounters(a, b quota.DeductResult) bool {
	if a.IdemKey != b.IdemKey || len(a.Counters) != len(b.Counters) {
		return false
	}
	for i := range a.Counters {
		x, y := a.Counters[i], b.Counters[i]
		if x.IdentityType != y.IdentityType || x.Identity != y.Identity || x.Dimension != y.Dimension ||
			x.Window.ID() != y.Window.ID() || x.Used != y.Used || x.Limit != y.Limit || !x.ResetsAt.Equal(y.ResetsAt) {
			return false
		}
	}
	return true
}

// A rollback gives back exactly what its deduct took, once, however often it is called,
// concurrently or not; then the idemKey cannot deduct again.
func TestRollbackGivesBackOnce(t *testing.T) {
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC))
	day := calendar(t, quota.Day, "Asia/Shanghai")
	roll := rolling(t, 24*time.Hour)
	e.rule(t, 1, "USER", "ITEM:1", 10, day)
	e.rule(t, 1, "USER", "ITEM:1", 10, roll)
	e.rule(t, 1, "DEVICE", "*", 10, day)
	items := []quota.Item{item("USER", "u", 3, "ITEM:1"), item("DEVICE", "d", 3, "ITEM:1")}
	rec := history.For(t)
	if _, err := deductIn(rec, e.svc, 1, "keep", items...); err != nil {
		t.Fatal(err)
	}
	if _, err := deductIn(rec, e.svc, 1, "undo", items...); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var returned []quota.Returned
	for range 10 {
		wg.Go(func() {
			r, err := rollbackIn(rec, e.svc, 1, "undo")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			returned = append(returned, r.Returned...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(returned) != 3 {
		t.Fatalf("10 rollbacks returned %+v; want the 3 counters once", returned)
	}
	for _, r := range returned {
		if r.Amount != 3 {
			t.Fatalf("returned %+v; want 3", r)
		}
	}
	if got := e.used(t, 1, "USER", "u", "ITEM:1", day); got != 3 {
		t.Fatalf("user day counter %d; want 3", got)
	}
	if got := e.used(t, 1, "USER", "u", "ITEM:1", roll); got != 3 {
		t.Fatalf("user rolling counter %d; want 3", got)
	}
	if got := e.used(t, 1, "DEVICE", "d", "*", day); got != 3 {
		t.Fatalf("device counter %d; want 3", got)
	}
	if st := e.svc.Metrics(); st.Rollbacks != 10 || st.GivenBack != 9 {
		t.Fatalf("metrics %+v; want 10 rollbacks giving back 9", st)
	}
	r, err := rollbackIn(rec, e.svc, 1, "undo")
	if err != nil || len(r.Returned) != 0 {
		t.Fatalf("another rollback: %+v %v; want nothing returned", r, err)
	}
	// a late retry of the rolled-back deduct is refused, not counted
	if _, err := deductIn(rec, e.svc, 1, "undo", items...); !errors.Is(err, quota.ErrRolledBack) {
		t.Fatalf("deduct after rollback: %v; want ErrRolledBack", err)
	}
	// an unknown key is a no-op, and a deduct arriving after it is refused too
	if r, err := rollbackIn(rec, e.svc, 1, "never"); err != nil || len(r.Returned) != 0 {
		t.Fatalf("rollback of an unknown key: %+v %v", r, err)
	}
	if _, err := deductIn(rec, e.svc, 1, "never", items...); !errors.Is(err, quota.ErrRolledBack) {
		t.Fatalf("deduct after its rollback: %v; want ErrRolledBack", err)
	}
	if got := e.used(t, 1, "USER", "u", "ITEM:1", day); got != 3 {
		t.Fatalf("user day counter %d; want 3", got)
	}
}

// A rollback racing its own deduct ends with nothing taken, whichever runs first.
func TestRollbackRacingDeduct(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
		day := calendar(t, quota.Day, "UTC")
		for _, typ := range []string{"USER", "DEVICE", "PHONE"} {
			e.rule(t, 1, typ, "ITEM:1", 1000, day)
		}
		items := []quota.Item{item("USER", "u", 1, "ITEM:1"), item("DEVICE", "d", 1, "ITEM:1"), item("PHONE", "p", 1, "ITEM:1")}
		rec := history.For(t)
		for i := range 50 {
			key := fmt.Sprintf("race-%d", i)
			var wg sync.WaitGroup
			wg.Go(func() {
				if _, err := deductIn(rec, e.svc, 1, key, items...); err != nil && !errors.Is(err, quota.ErrRolledBack) {
					t.Error(err)
				}
			})
			wg.Go(func() {
				if _, err := rollbackIn(rec, e.svc, 1, key); err != nil {
					t.Error(err)
				}
			})
			wg.Wait()
		}
		for _, it := range items {
			if got := e.used(t, 1, it.IdentityType, it.Identity, "ITEM:1", day); got != 0 {
				t.Fatalf("%s counter %d after deducts raced by their rollbacks; want 0", it.IdentityType, got)
			}
		}
	})
}
