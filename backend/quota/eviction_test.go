package quota_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/quota"
	"vouchergate/testkit"
)

// A Redis whose maxmemory-policy can evict quota keys (seed 004's volatile-ttl) is refused at
// start, naming the setting that allows it; allowed, it is reported (CheckEviction, the metric)
// until the policy is noeviction again. On a cluster, one master's policy is enough.
func TestEvictionPolicyReported(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own Redis servers")
	}
	t.Run("single", func(t *testing.T) {
		_, rdb := ownRedis(t)
		evictionPolicyReported(t, rdb, []*redis.Client{rdb})
	})
	t.Run("cluster", func(t *testing.T) {
		cluster := testkit.StartRedisCluster(t)
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
		t.Cleanup(func() { rdb.Close() })
		var masters []*redis.Client
		var mu sync.Mutex
		if err := rdb.ForEachMaster(t.Context(), func(_ context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			masters = append(masters, c)
			return nil
		}); err != nil || len(masters) != 3 {
			t.Fatalf("masters: %d %v", len(masters), err)
		}
		evictionPolicyReported(t, rdb, masters[1:2])
	})
}

func evictionPolicyReported(t *testing.T, rdb redis.UniversalClient, change []*redis.Client) {
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
	if err := e.svc.CheckEviction(t.Context()); err != nil || e.svc.Metrics().MayEvict {
		t.Fatalf("noeviction: %v, metric %v", err, e.svc.Metrics().MayEvict)
	}
	setPolicy := func(p string) {
		for _, c := range change {
			if err := c.ConfigSet(t.Context(), "maxmemory-policy", p).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	setPolicy("volatile-ttl")
	_, err := quota.New(t.Context(), e.cfg)
	if !errors.Is(err, quota.ErrMayEvict) || !strings.Contains(err.Error(), "volatile-ttl") || !strings.Contains(err.Error(), "VG_QUOTA_EVICTION=allow") ||
		!strings.Contains(err.Error(), change[0].Options().Addr) {
		t.Fatalf("start on volatile-ttl: %v; want ErrMayEvict naming the node, the policy and VG_QUOTA_EVICTION", err)
	}
	cfg := e.cfg
	cfg.AllowEviction = true
	svc := e.start(t, cfg)
	if err := svc.CheckEviction(t.Context()); !errors.Is(err, quota.ErrMayEvict) || !svc.Metrics().MayEvict {
		t.Fatalf("allowed, volatile-ttl: %v, metric %v; want it reported", err, svc.Metrics().MayEvict)
	}
	setPolicy("allkeys-lru")
	if err := svc.CheckEviction(t.Context()); !errors.Is(err, quota.ErrMayEvict) || !strings.Contains(err.Error(), "allkeys-lru") {
		t.Fatalf("allkeys-lru: %v", err)
	}
	setPolicy("noeviction")
	if err := svc.CheckEviction(t.Context()); err != nil || svc.Metrics().MayEvict {
		t.Fatalf("noeviction again: %v, metric %v", err, svc.Metrics().MayEvict)
	}
}

// A Redis whose CONFIG is disabled (rename-command CONFIG "", as managed Redis services run it)
// cannot tell its policy: the service starts without VG_QUOTA_EVICTION=allow, and reports it
// (ErrEvictionUnknown naming the node, the metric, one warning) rather than refusing.
func TestEvictionPolicyUnreadableIsReported(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own Redis")
	}
	srv := testkit.StartRedis(t, testkit.RedisArgs("--rename-command", "CONFIG", ""))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	log, logged := testkit.CaptureLog()
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
	cfg := e.cfg
	cfg.Log = log
	svc := e.start(t, cfg) // VG_QUOTA_EVICTION unset: it must start
	err := svc.CheckEviction(t.Context())
	if !errors.Is(err, quota.ErrEvictionUnknown) || errors.Is(err, quota.ErrMayEvict) || !strings.Contains(err.Error(), srv.Addr()) ||
		!strings.Contains(err.Error(), "CONFIG") || !strings.Contains(err.Error(), "noeviction") {
		t.Fatalf("CONFIG disabled: %v; want ErrEvictionUnknown naming the node, CONFIG and noeviction", err)
	}
	if m := svc.Metrics(); !m.EvictionUnknown || m.MayEvict {
		t.Fatalf("metrics %+v; want the policy unknown, not evicting", m)
	}
	if n := strings.Count(logged(), "cannot read Redis' maxmemory-policy"); n != 1 {
		t.Fatalf("%d warnings after a start and a look; want one, at the change:\n%s", n, logged())
	}
	if _, err := svc.Deduct(t.Context(), 1, "k", []quota.Item{item("USER", "u", 1, "ITEM:1")}); err != nil {
		t.Fatalf("a deduct on the Redis without CONFIG: %v", err)
	}
}
