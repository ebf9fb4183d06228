package quota_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest/history"
	"vouchergate/backend/quota"
	"vouchergate/testkit"
)

func clusterRedis(t testing.TB) redis.UniversalClient {
	t.Helper()
	c := testkit.StartRedisCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: 64})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// servers runs f on the shared single Redis and on a fresh three-master cluster.
func servers(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Run("single", func(t *testing.T) { f(t, singleRedis(t)) })
	t.Run("cluster", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a Redis Cluster")
		}
		f(t, clusterRedis(t))
	})
}

// Concurrent deducts across user, device and phone never pass any identity's limit, and a
// refused request leaves every identity as it was: each counter in Redis equals the sum of
// the granted requests that name it.
func TestMultiIdentityConcurrent(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
		day := calendar(t, quota.Day, "Asia/Shanghai")
		limits := map[string]int64{"USER": 4, "DEVICE": 6, "PHONE": 5}
		for typ, l := range limits {
			e.rule(t, 1, typ, "ITEM:1001", l, day)
		}
		ids := map[string][]string{"USER": {"u0", "u1", "u2", "u3"}, "DEVICE": {"d0", "d1"}, "PHONE": {"p0", "p1", "p2"}}
		rec := history.For(t)

		var mu sync.Mutex
		granted := map[string]int64{} // "TYPE:id" -> amount granted
		refused := 0
		var refusedRecords []string // the records a refused request must not have left
		var wg sync.WaitGroup
		for i := range 200 {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			var items []quota.Item
			for _, typ := range []string{"PHONE", "USER", "DEVICE"} { // not in the service's order
				items = append(items, item(typ, ids[typ][r.IntN(len(ids[typ]))], 1+r.Int64N(2), "ITEM:1001"))
			}
			wg.Go(func() {
				_, err := deductIn(rec, e.svc, 1, fmt.Sprintf("o-%d", i), items...)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					for _, it := range items {
						granted[it.IdentityType+":"+it.Identity] += it.Amount
					}
				case errors.Is(err, quota.ErrQuotaExceeded):
					refused++
					for _, it := range items {
						refusedRecords = append(refusedRecords, fmt.Sprintf("%squota:{1:%s:%s}:i:o-%d", e.cfg.KeyPrefix, it.IdentityType, it.Identity, i))
					}
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			nodes := map[string]bool{}
			for typ, list := range ids {
				for _, id := range list {
					n, err := cc.MasterForKey(t.Context(), fmt.Sprintf("%squota:{1:%s:%s}:x", e.cfg.KeyPrefix, typ, id))
					if err != nil {
						t.Fatal(err)
					}
					nodes[n.Options().Addr] = true
				}
			}
			if len(nodes) < 2 {
				t.Fatalf("the identities live on %d master(s): the run does not cross nodes", len(nodes))
			}
		}
		if refused == 0 || len(granted) == 0 {
			t.Fatalf("granted %v, refused %d: the run proves nothing", granted, refused)
		}
		// read Redis directly too: a refused request left no record on any identity
		for _, k := range refusedRecords {
			if n, err := rdb.Exists(t.Context(), k).Result(); err != nil || n != 0 {
				t.Fatalf("a refused request left %s (%d, %v)", k, n, err)
			}
		}
		for typ, list := range ids {
			for _, id := range list {
				raw, err := rdb.Get(t.Context(), fmt.Sprintf("%squota:{1:%s:%s}:c:%s/%s:ITEM:1001",
					e.cfg.KeyPrefix, typ, id, day.ID(), "20250303")).Int64()
				if err != nil && !errors.Is(err, redis.Nil) {
					t.Fatal(err)
				}
				if raw != granted[typ+":"+id] {
					t.Errorf("%s %s: Redis holds %d; the granted requests add up to %d", typ, id, raw, granted[typ+":"+id])
				}
				got := e.used(t, 1, typ, id, "ITEM:1001", day)
				if got > limits[typ] {
					t.Errorf("%s %s counter %d over its limit %d", typ, id, got, limits[typ])
				}
				if want := granted[typ+":"+id]; got != want {
					t.Errorf("%s %s counter %d; the granted requests add up to %d", typ, id, got, want)
				}
			}
		}
	})
}

// A request refused at a later identity gives back what it took from the earlier ones, and a
// retry with the same idemKey may succeed once there is room.
func TestRefusedRequestChangesNothing(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
		day := calendar(t, quota.Day, "UTC")
		e.rule(t, 1, "DEVICE", "ITEM:1", 10, day)
		e.rule(t, 1, "PHONE", "ITEM:1", 1, day)
		e.rule(t, 1, "USER", "ITEM:1", 10, day)
		if _, err := e.deduct(1, "first", item("PHONE", "p", 1, "ITEM:1")); err != nil {
			t.Fatal(err)
		}
		items := []quota.Item{item("USER", "u", 1, "ITEM:1"), item("DEVICE", "d", 1, "ITEM:1"), item("PHONE", "p", 1, "ITEM:1")}
		_, err := e.deduct(1, "second", items...)
		var ex *quota.ExceededError
		if !errors.As(err, &ex) || ex.Counter.IdentityType != "PHONE" || ex.Counter.Used != 1 || ex.Requested != 1 {
			t.Fatalf("deduct: %v; want PHONE exceeded at 1", err)
		}
		// DEVICE comes before PHONE, so it was taken and must have been given back
		for _, it := range items[:2] {
			if got := e.used(t, 1, it.IdentityType, it.Identity, "ITEM:1", day); got != 0 {
				t.Fatalf("%s counter %d after a refused request; want 0", it.IdentityType, got)
			}
		}
		if _, err := e.svc.Rollback(t.Context(), 1, "first"); err != nil {
			t.Fatal(err)
		}
		res, err := e.deduct(1, "second", items...)
		if err != nil || len(res.Counters) != 3 {
			t.Fatalf("retry after room: %+v %v", res, err)
		}
		for _, c := range res.Counters {
			if c.Used != 1 {
				t.Fatalf("retry: %+v; want used 1 everywhere", c)
			}
		}
	})
}
