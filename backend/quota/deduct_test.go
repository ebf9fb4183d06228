package quota_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"vouchergate/backend/backendtest/history"
	"vouchergate/backend/quota"
)

// "3 a day, 10 a week": 50 concurrent deducts for one user, exactly 3 succeed, and the
// counters in Redis say 3; the day resets at the rule's midnight, the week does not.
func TestThreeADayTenAWeek(t *testing.T) {
	const tz = "Asia/Shanghai"
	// Monday 2025-03-03 10:00 in Shanghai
	e := newEnv(t, mustTime(t, time.DateTime, "2025-03-03 10:00:00", tz))
	day, week := calendar(t, quota.Day, tz), calendar(t, quota.Week, tz)
	e.rule(t, 1, "USER", "ITEM:1001", 3, day)
	e.rule(t, 1, "USER", "ITEM:1001", 10, week)
	rec := history.For(t)

	burst := func(round int) (ok int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range 50 {
			wg.Go(func() {
				_, err := deductIn(rec, e.svc, 1, fmt.Sprintf("order-%d-%d", round, i), item("USER", "12345", 1, "ITEM:1001"))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case !errors.Is(err, quota.ErrQuotaExceeded):
					t.Errorf("deduct: %v", err)
				}
			})
		}
		wg.Wait()
		return ok
	}
	// Mon, Tue, Wed: 3 a day; Thu: the week has 1 left; Fri: none
	for d, want := range []int{3, 3, 3, 1, 0} {
		if got := burst(d); got != want {
			t.Fatalf("day %d: %d deducts succeeded; want %d", d, got, want)
		}
		if got := e.used(t, 1, "USER", "12345", "ITEM:1001", day); got != int64(want) {
			t.Fatalf("day %d: day counter %d; want %d", d, got, want)
		}
		if got, w := e.used(t, 1, "USER", "12345", "ITEM:1001", week), int64(min(10, 3*(d+1))); got != w {
			t.Fatalf("day %d: week counter %d; want %d", d, got, w)
		}
		e.clock.Advance(24 * time.Hour)
	}
	if st := e.svc.Metrics(); st.Deducts != 250 || st.Taken != 10 || st.Exceeded != 240 || st.Rules != 2 {
		t.Fatalf("metrics %+v; want 250 deducts, 10 taken, 240 exceeded, 2 rules", st)
	}
}
