package quota_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/quota"
	"vouchergate/testkit"
)

// Redis down: deducts and rollbacks fail with ErrUnavailable (a 503), nothing else. Redis back
// empty (no scripts, no keys): deducts work again without a restart of the service.
func TestRedisDownAndBackEmpty(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a Redis")
	}
	srv := testkit.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
	day := calendar(t, quota.Day, "UTC")
	e.rule(t, 1, "USER", "ITEM:1", 2, day)
	items := []quota.Item{item("USER", "u", 1, "ITEM:1"), item("DEVICE", "d", 1, "ITEM:1")}
	if _, err := e.deduct(1, "before", items...); err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	if _, err := e.deduct(1, "down", items...); !errors.Is(err, quota.ErrUnavailable) {
		t.Fatalf("deduct with Redis down: %v; want ErrUnavailable", err)
	}
	if _, err := e.svc.Rollback(context.Background(), 1, "before"); !errors.Is(err, quota.ErrUnavailable) {
		t.Fatalf("rollback with Redis down: %v; want ErrUnavailable", err)
	}
	if _, err := e.svc.Usage(context.Background(), 1, "USER", "u", []string{"ITEM:1"}); !errors.Is(err, quota.ErrUnavailable) {
		t.Fatalf("usage with Redis down: %v; want ErrUnavailable", err)
	}
	if st := e.svc.Metrics(); st.Unavailable != 3 {
		t.Fatalf("metrics %+v; want 3 unavailable", st)
	}

	srv.RestartEmpty()
	res, err := e.deduct(1, "after", items...)
	if err != nil {
		t.Fatalf("deduct after Redis came back empty: %v", err)
	}
	if len(res.Counters) != 1 || res.Counters[0].Used != 1 {
		t.Fatalf("after an empty restart: %+v; want a fresh counter at 1", res.Counters)
	}
	if r, err := e.svc.Rollback(context.Background(), 1, "after"); err != nil || len(r.Returned) != 1 {
		t.Fatalf("rollback after restart: %+v %v", r, err)
	}
}

// A cluster that lost its scripts (SCRIPT FLUSH, as after a restart) still runs the pipelined
// first step: the scripts load again.
func TestClusterScriptsFlushed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rdb := clusterRedis(t)
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
	e.rule(t, 1, "USER", "ITEM:1", 5, calendar(t, quota.Day, "UTC"))
	cc := rdb.(*redis.ClusterClient)
	if err := cc.ForEachMaster(t.Context(), func(ctx context.Context, c *redis.Client) error {
		return c.ScriptFlush(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
	res, err := e.deduct(1, "k", item("USER", "u", 1, "ITEM:1"), item("PHONE", "p", 1, "ITEM:1"))
	if err != nil || len(res.Counters) != 1 || res.Counters[0].Used != 1 {
		t.Fatalf("deduct after SCRIPT FLUSH: %+v %v", res, err)
	}
}
