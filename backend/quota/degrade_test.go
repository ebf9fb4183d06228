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

// ownRedis starts a redis-server for the test alone and a client of it that fails fast, as the
// backend's does (no retries, short timeouts).
func ownRedis(t *testing.T) (*testkit.RedisServer, *redis.Client) {
	t.Helper()
	srv := testkit.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, PoolTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	return srv, rdb
}

// With Redis stopped, a business line set to whenUnavailable OPEN gets degraded passes that
// count nothing (a deduct and its dry run), counted by business line; one left CLOSED gets
// ErrUnavailable as before. After the first failure the OPEN line's deducts skip Redis until the
// backoff ends. Once Redis is back a deduct after the backoff counts again, and the rollback of
// a degraded deduct gives back nothing.
func TestDegradeOpenWithRedisStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a Redis")
	}
	srv, rdb := ownRedis(t)
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
	day := calendar(t, quota.Day, "UTC")
	for _, biz := range []int64{1, 2} {
		e.rule(t, biz, "USER", "ITEM:1", 5, day)
	}
	if _, err := e.svc.PutSetting(t.Context(), quota.Setting{BizID: 1, WhenUnavailable: quota.Open}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	deduct := func(biz int64, key string) (quota.DeductResult, error) {
		return e.svc.Deduct(ctx, biz, key, []quota.Item{item("USER", "u", 1, "ITEM:1")})
	}
	if _, err := deduct(1, "before"); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	res, err := deduct(1, "down-1")
	if err != nil || !res.Degraded || len(res.Counters) != 0 {
		t.Fatalf("OPEN with Redis stopped: %+v %v; want a degraded pass", res, err)
	}
	if _, err := deduct(2, "down-1"); !errors.Is(err, quota.ErrUnavailable) {
		t.Fatalf("CLOSED with Redis stopped: %v; want ErrUnavailable", err)
	}
	calls := 0
	rdb.AddHook(countCalls{&calls})
	for i := range 20 {
		if res, err := deduct(1, "skipped"); err != nil || !res.Degraded {
			t.Fatalf("OPEN deduct %d in the backoff: %+v %v", i, res, err)
		}
	}
	chk, err := e.svc.Check(ctx, 1, "skipped", []quota.Item{item("USER", "u", 1, "ITEM:1")})
	if err != nil || !chk.Degraded {
		t.Fatalf("check of an OPEN line in the backoff: %+v %v", chk, err)
	}
	if calls != 0 {
		t.Fatalf("%d Redis calls during the backoff; want none", calls)
	}
	if m := e.svc.Metrics(); m.Degraded != 22 {
		t.Fatalf("degraded answers counted %d; want 22", m.Degraded)
	}
	// after the backoff one deduct tries Redis again (still down: degraded)
	e.clock.Advance(2 * time.Second)
	if res, err := deduct(1, "probe"); err != nil || !res.Degraded || calls == 0 {
		t.Fatalf("after the backoff: %+v %v, %d calls; want a degraded answer that tried Redis", res, err, calls)
	}

	srv.Start()
	e.clock.Advance(2 * time.Second)
	testkit.Eventually(t, "deducts counting again", func() bool {
		res, err := deduct(1, "after")
		return err == nil && !res.Degraded
	})
	if got := e.used(t, 1, "USER", "u", "ITEM:1", day); got != 1 {
		t.Fatalf("ITEM:1 at %d after Redis came back (empty); want only the deduct after it", got)
	}
	if res, err := e.svc.Rollback(ctx, 1, "down-1"); err != nil || len(res.Returned) != 0 {
		t.Fatalf("rollback of a degraded deduct: %+v %v; want nothing given back", res, err)
	}
	if got := e.used(t, 1, "USER", "u", "ITEM:1", day); got != 1 {
		t.Fatalf("ITEM:1 at %d after the degraded deduct's rollback; want 1", got)
	}
}

// countCalls counts the commands a client sends.
type countCalls struct{ n *int }

func (h countCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { *h.n++; return next(ctx, cmd) }
}
func (h countCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { *h.n++; return next(ctx, cmds) }
}

// On a cluster, a dead master's identities degrade for an OPEN business line and answer
// ErrUnavailable for a CLOSED one.
func TestDegradeOpenWithAClusterMasterDead(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cluster := testkit.StartRedisCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
	day := calendar(t, quota.Day, "UTC")
	for _, biz := range []int64{1, 2} {
		e.rule(t, biz, "USER", "ITEM:1", 5, day)
	}
	if _, err := e.svc.PutSetting(t.Context(), quota.Setting{BizID: 1, WhenUnavailable: quota.Open}); err != nil {
		t.Fatal(err)
	}
	for _, biz := range []int64{1, 2} {
		if _, err := e.svc.Deduct(t.Context(), biz, "before", []quota.Item{item("USER", "u", 1, "ITEM:1")}); err != nil {
			t.Fatal(err)
		}
	}
	sameNode := cluster.MasterOf(cluster.KeySlot(t, "{1:USER:u}")) == cluster.MasterOf(cluster.KeySlot(t, "{2:USER:u}"))
	cluster.KillMasterOf(t, "{1:USER:u}")
	res, err := e.svc.Deduct(t.Context(), 1, "down", []quota.Item{item("USER", "u", 1, "ITEM:1")})
	if err != nil || !res.Degraded {
		t.Fatalf("OPEN, the identity's master dead: %+v %v; want degraded", res, err)
	}
	if !sameNode {
		cluster.KillMasterOf(t, "{2:USER:u}")
	}
	if _, err := e.svc.Deduct(t.Context(), 2, "down", []quota.Item{item("USER", "u", 1, "ITEM:1")}); !errors.Is(err, quota.ErrUnavailable) {
		t.Fatalf("CLOSED, the identity's master dead: %v; want ErrUnavailable", err)
	}
}
