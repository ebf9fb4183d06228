package quota

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/testkit"
)

// A step sent again by the Redis client (a retry after a timeout) is still this attempt's own.
// Another attempt's replay makes that attempt the step's holder, and only the holder's undo
// gives the step back: the first attempt no longer may, since the second relies on it.
func TestStepHolderUndoes(t *testing.T) {
	opts, err := redis.ParseURL(testkit.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	sc := scripts{rdb: rdb, idemTTL: "60000"}
	w, _ := NewCalendarWindow(Day, "UTC")
	rules := newRuleSet([]Rule{{ID: 1, BizID: 1, IdentityType: "USER", Dimension: "ITEM:1", Limit: 5, Window: w}}, nil, nil)
	now := time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC)
	steps, err := plan(testkit.RedisPrefix(t), 1, []Item{{IdentityType: "USER", Identity: "u", Dimensions: []string{"ITEM:1"}, Amount: 2}}, rules, now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var r stepResult
	for i, want := range []int64{stepTaken, stepTaken} {
		r, err = sc.deduct(ctx, &steps[0], "k", "attempt-1", now.UnixMilli(), nil)
		if err != nil || r.status != want || r.used != "2:0" {
			t.Fatalf("send %d: %+v %v; want status %d, used 2", i, r, err, want)
		}
	}
	replay, err := sc.deduct(ctx, &steps[0], "k", "attempt-2", now.UnixMilli(), nil)
	if err != nil || replay.status != stepReplayed {
		t.Fatalf("another attempt: %+v %v; want a replay", replay, err)
	}
	if err := sc.undo(ctx, &steps[0], &r, "k", "attempt-1"); err != nil {
		t.Fatal(err)
	}
	if st, _, _, _ := sc.record(ctx, steps[0].base, "k"); st != "D" {
		t.Fatalf("the first attempt's undo, after another replayed the step, changed the record to %q", st)
	}
	if err := sc.undo(ctx, &steps[0], &replay, "k", "attempt-2"); err != nil {
		t.Fatal(err)
	}
	if st, _, _, _ := sc.record(ctx, steps[0].base, "k"); st != "" {
		t.Fatalf("the holder's undo left the record %q", st)
	}
	if v, err := rdb.Get(ctx, steps[0].base+"c:"+steps[0].counters[0].seg+":ITEM:1").Result(); err != redis.Nil {
		t.Fatalf("counter after undo: %q %v; want gone", v, err)
	}
}
