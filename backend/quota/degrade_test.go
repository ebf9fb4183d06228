package quota_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
// ErrUnavailable for a CLOSED one. The OPEN line's series shows at 0 from its setting; once the
// breaker is open, its deducts and checks that name the dead master's identity skip Redis (no
// call at all, so none counts on a live master's identity of the same request either) and are
// counted by business line; the live master's identities of a CLOSED line still count.
func TestDegradeOpenWithAClusterMasterDead(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cluster := testkit.StartRedisCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
	reg := prometheus.NewRegistry()
	cfg := e.cfg
	cfg.Metrics = reg
	svc := e.start(t, cfg)
	day := calendar(t, quota.Day, "UTC")
	for _, biz := range []int64{1, 2} {
		e.rule(t, biz, "USER", "ITEM:1", 5, day)
	}
	if _, err := svc.PutSetting(t.Context(), quota.Setting{BizID: 1, WhenUnavailable: quota.Open}); err != nil {
		t.Fatal(err)
	}
	if got, shown := degradedBy(t, reg, "1"); !shown || got != 0 {
		t.Fatalf("business line 1's degraded series %v (shown %v) once set OPEN; want shown at 0", got, shown)
	}
	// v lives on another master than u, whichever u's is
	dead := cluster.MasterOf(cluster.KeySlot(t, "{1:USER:u}"))
	live := ""
	for i := 0; live == ""; i++ {
		if id := fmt.Sprintf("v%d", i); cluster.MasterOf(cluster.KeySlot(t, "{1:USER:"+id+"}")) != dead {
			live = id
		}
	}
	deduct := func(biz int64, key string, items ...quota.Item) (quota.DeductResult, error) {
		return svc.Deduct(t.Context(), biz, key, items)
	}
	for _, biz := range []int64{1, 2} {
		if _, err := deduct(biz, "before", item("USER", "u", 1, "ITEM:1"), item("USER", live, 1, "ITEM:1")); err != nil {
			t.Fatal(err)
		}
	}
	sameNode := dead == cluster.MasterOf(cluster.KeySlot(t, "{2:USER:u}"))
	cluster.KillMasterOf(t, "{1:USER:u}")
	res, err := deduct(1, "down", item("USER", "u", 1, "ITEM:1"))
	if err != nil || !res.Degraded {
		t.Fatalf("OPEN, the identity's master dead: %+v %v; want degraded", res, err)
	}
	calls := 0
	rdb.AddHook(countCalls{&calls})
	const n = 20
	for i := range n {
		res, err := deduct(1, fmt.Sprintf("skipped-%d", i), item("USER", "u", 1, "ITEM:1"), item("USER", live, 1, "ITEM:1"))
		if err != nil || !res.Degraded || len(res.Counters) != 0 {
			t.Fatalf("OPEN deduct %d in the backoff, one identity on the dead master and one on a live one: %+v %v", i, res, err)
		}
	}
	if chk, err := svc.Check(t.Context(), 1, "skipped-check", []quota.Item{item("USER", "u", 1, "ITEM:1")}); err != nil || !chk.Degraded {
		t.Fatalf("check of an OPEN line in the backoff: %+v %v", chk, err)
	}
	if calls != 0 {
		t.Fatalf("%d Redis calls during the backoff; want none", calls)
	}
	if got, _ := degradedBy(t, reg, "1"); got != n+2 {
		t.Fatalf("business line 1's degraded answers counted %v; want %d", got, n+2)
	}
	if got := e.used(t, 1, "USER", live, "ITEM:1", day); got != 1 {
		t.Fatalf("%s, on a live master, at %d after the degraded deducts that named it; want the 1 before", live, got)
	}
	if !sameNode {
		cluster.KillMasterOf(t, "{2:USER:u}")
	}
	if _, err := deduct(2, "down", item("USER", "u", 1, "ITEM:1")); !errors.Is(err, quota.ErrUnavailable) {
		t.Fatalf("CLOSED, the identity's master dead: %v; want ErrUnavailable", err)
	}
	if _, err := deduct(2, "live", item("USER", live, 1, "ITEM:1")); err != nil {
		t.Fatalf("CLOSED, an identity on a live master: %v", err)
	}
	if got, shown := degradedBy(t, reg, "2"); shown || got != 0 {
		t.Fatalf("business line 2's degraded answers %v (shown %v); a CLOSED line answers none degraded", got, shown)
	}
}

// degradedBy reads vouchergate_quota_degraded_total{biz_id} from reg, and whether it is shown.
func degradedBy(t *testing.T, reg *prometheus.Registry, biz string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	m := testkit.Metrics{}
	for _, f := range families {
		m[f.GetName()] = f
	}
	return m.Count(t, "vouchergate_quota_degraded_total", "biz_id", biz), m.Has("vouchergate_quota_degraded_total", "biz_id", biz)
}
