package quota_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"vouchergate/backend/quota"
)

// fill deducts one at a time until refused and returns how many were taken.
func (e *env) fill(t *testing.T, biz int64, typ, id, dim string) int {
	t.Helper()
	for n := 0; n < 100; n++ {
		e.seq++
		_, err := e.deduct(biz, fmt.Sprintf("fill-%d", e.seq), item(typ, id, 1, dim))
		if errors.Is(err, quota.ErrQuotaExceeded) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("never refused")
	return 0
}

// The day ends at midnight in the rule's zone, including across daylight-saving changes (a
// 23-hour and a 25-hour day in New York), and a new day does not reset the week.
func TestDayRolloverInTimeZone(t *testing.T) {
	tests := []struct {
		name, tz  string
		start     string        // local time of the first deduct
		lastInDay time.Duration // after start: the last instant of that day
		weekRolls bool
	}{
		{"Shanghai", "Asia/Shanghai", "2025-03-05 00:00:00", 24*time.Hour - time.Second, false},
		{"New York spring forward", "America/New_York", "2025-03-09 00:00:00", 23*time.Hour - time.Second, true},
		{"New York fall back", "America/New_York", "2025-11-02 00:00:00", 25*time.Hour - time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, mustTime(t, time.DateTime, tt.start, tt.tz))
			day, week := calendar(t, quota.Day, tt.tz), calendar(t, quota.Week, tt.tz)
			e.rule(t, 1, "USER", "ITEM:1001", 3, day)
			e.rule(t, 1, "USER", "ITEM:1001", 5, week)
			if n := e.fill(t, 1, "USER", "u1", "ITEM:1001"); n != 3 {
				t.Fatalf("first day took %d; want 3", n)
			}
			e.clock.Advance(tt.lastInDay)
			if n := e.fill(t, 1, "USER", "u1", "ITEM:1001"); n != 0 {
				t.Fatalf("a second before local midnight took %d; want 0", n)
			}
			e.clock.Advance(time.Second)
			want := 2 // the week's 5 minus the 3 taken
			if tt.weekRolls {
				want = 3 // 2025-03-09 and 2025-11-02 are Sundays: a new ISO week starts too
			}
			if n := e.fill(t, 1, "USER", "u1", "ITEM:1001"); n != want {
				t.Fatalf("at local midnight took %d; want %d", n, want)
			}
			cs, err := e.svc.Usage(t.Context(), 1, "USER", "u1", []string{"ITEM:1001"})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				if c.Window.Type == quota.Day {
					midnight := e.clock.Now().AddDate(0, 0, 1)
					if !c.ResetsAt.Equal(midnight) {
						t.Errorf("day resetsAt %v; want %v", c.ResetsAt, midnight)
					}
				}
			}
		})
	}
}

// The ISO week runs Monday to Sunday in the rule's zone, and week 1 of 2025 spans the new year.
func TestISOWeekBoundary(t *testing.T) {
	const tz = "Asia/Shanghai"
	// Sunday 2024-12-29 23:59:59 is in 2024-W52; Monday 2024-12-30 starts 2025-W01
	e := newEnv(t, mustTime(t, time.DateTime, "2024-12-29 23:59:59", tz))
	week := calendar(t, quota.Week, tz)
	e.rule(t, 1, "USER", "ITEM:1", 2, week)
	if n := e.fill(t, 1, "USER", "u", "ITEM:1"); n != 2 {
		t.Fatalf("took %d; want 2", n)
	}
	e.clock.Advance(time.Second) // Monday 00:00
	if _, err := e.deduct(1, "mon", item("USER", "u", 1, "ITEM:1")); err != nil {
		t.Fatalf("Monday: %v", err)
	}
	e.clock.Advance(2 * 24 * time.Hour) // Wednesday 2025-01-01: same ISO week, new calendar year
	if _, err := e.deduct(1, "wed", item("USER", "u", 1, "ITEM:1")); err != nil {
		t.Fatalf("Wednesday: %v", err)
	}
	if _, err := e.deduct(1, "wed2", item("USER", "u", 1, "ITEM:1")); !errors.Is(err, quota.ErrQuotaExceeded) {
		t.Fatalf("third in 2025-W01: %v; want exceeded", err)
	}
	e.clock.Advance(5 * 24 * time.Hour) // Monday 2025-01-06
	if _, err := e.deduct(1, "next", item("USER", "u", 1, "ITEM:1")); err != nil {
		t.Fatalf("2025-W02: %v", err)
	}
}

// A fixed window counts only inside [start, end).
func TestFixedWindow(t *testing.T) {
	start := time.Date(2025, 11, 11, 0, 0, 0, 0, time.UTC)
	e := newEnv(t, start.Add(-time.Second))
	w, err := quota.NewFixedWindow(start, start.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	e.rule(t, 1, "USER", "ITEM:1", 1, w)
	res, err := e.deduct(1, "before", item("USER", "u", 1, "ITEM:1"))
	if err != nil || len(res.Counters) != 0 {
		t.Fatalf("before the window: %+v %v; want no counter", res, err)
	}
	e.clock.Advance(time.Second)
	if n := e.fill(t, 1, "USER", "u", "ITEM:1"); n != 1 {
		t.Fatalf("in the window took %d; want 1", n)
	}
	e.clock.Advance(24 * time.Hour)
	if res, err := e.deduct(1, "after", item("USER", "u", 1, "ITEM:1")); err != nil || len(res.Counters) != 0 {
		t.Fatalf("after the window: %+v %v; want no counter", res, err)
	}
}

// A purchase in a rolling window counts for exactly its size: not a millisecond less or more.
func TestRollingWindowIsExact(t *testing.T) {
	t0 := time.Date(2025, 3, 9, 6, 59, 59, 123e6, time.UTC)
	e := newEnv(t, t0)
	w := rolling(t, 24*time.Hour)
	e.rule(t, 1, "USER", "ITEM:1", 3, w)
	ok := func(key string, amount int64) error {
		_, err := e.deduct(1, key, item("USER", "u", amount, "ITEM:1"))
		return err
	}
	if err := ok("a", 2); err != nil { // t0: 2 of 3
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	if err := ok("b", 1); err != nil { // t0+1h: 3 of 3
		t.Fatal(err)
	}
	e.clock.Set(t0.Add(24*time.Hour - time.Millisecond))
	err := ok("c", 1)
	var ex *quota.ExceededError
	if !errors.As(err, &ex) {
		t.Fatalf("1ms before the first purchase expires: %v; want exceeded", err)
	}
	if ex.Counter.Used != 3 || !ex.Counter.ResetsAt.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("refusal says used %d, resets %v; want 3, %v", ex.Counter.Used, ex.Counter.ResetsAt, t0.Add(24*time.Hour))
	}
	e.clock.Set(t0.Add(24 * time.Hour))
	if err := ok("d", 2); err != nil { // the 2 of t0 stopped counting
		t.Fatalf("when the first purchase expires: %v", err)
	}
	if err := ok("e", 1); !errors.Is(err, quota.ErrQuotaExceeded) {
		t.Fatalf("over the limit: %v", err)
	}
	e.clock.Set(t0.Add(25*time.Hour - time.Millisecond))
	if got := e.used(t, 1, "USER", "u", "ITEM:1", w); got != 3 {
		t.Fatalf("used %d at t0+25h-1ms; want 3", got)
	}
	e.clock.Set(t0.Add(25 * time.Hour))
	if got := e.used(t, 1, "USER", "u", "ITEM:1", w); got != 2 {
		t.Fatalf("used %d at t0+25h; want 2", got)
	}
}
