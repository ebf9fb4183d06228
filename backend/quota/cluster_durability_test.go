package quota_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest/history"
	"vouchergate/backend/quota"
	"vouchergate/testkit"
)

// Deducts for one identity are answered while its Redis master's link to its replica is cut
// (loopback iptables), then the master is SIGKILLed and the replica, which never received
// them, is promoted. With VG_QUOTA_DURABILITY=async every deduct answered 200 is lost with its
// idemKey record: the customer's limit starts over (the test measures it and requires it, so
// the harness is known to bite). With replicated each of them waits for a replica that never
// acknowledges and is answered 503, and no deduct answered 200 is lost. Either way every
// idemKey, answered or not, retried after the failover ends counted exactly once.
func TestQuotaClusterFailoverDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a replicated Redis Cluster")
	}
	for _, tc := range []struct {
		name     string
		replicas int
	}{{"async", 0}, {"replicated", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := testkit.StartReplicatedRedisCluster(t)
			rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), ReadTimeout: 2 * time.Second})
			rdb.AddHook(reloadOnFailure{rdb})
			t.Cleanup(func() { rdb.Close() })
			e := newEnv(t, time.Now(), rdb)
			cfg := e.cfg
			cfg.Durability = quota.Durability{MinReplicas: tc.replicas, Wait: 200 * time.Millisecond}
			e.rule(t, 7, "USER", "ITEM:1001", 1000, calendar(t, quota.Day, "UTC"))
			svc := e.start(t, cfg) // reads the rule at start
			rec := history.For(t)
			if tc.replicas == 0 {
				rec = history.NewRecorder() // answered deducts are lost: the history must be rejected (below)
			}
			deduct := func(key string) error {
				_, err := deductIn(rec, svc, 7, key, item("USER", "u-1", 1, "ITEM:1001"))
				return err
			}
			used := func() int64 {
				t.Helper()
				var cs []quota.Counter
				err := eventually(10*time.Second, func() (err error) {
					cs, err = usageIn(rec, svc, 7, "USER", "u-1", []string{"ITEM:1001"})
					return err
				})
				if err != nil || len(cs) > 1 {
					t.Fatalf("usage of u-1: %+v %v", cs, err)
				}
				if len(cs) == 0 {
					return 0 // no counter: none survived
				}
				return cs[0].Used
			}
			if err := deduct("before"); err != nil {
				t.Fatal(err)
			}
			if u := used(); u != 1 {
				t.Fatalf("u-1 at %d after its first deduct", u)
			}

			master := cluster.MasterOf(cluster.KeySlot(t, "{7:USER:u-1}"))
			restore := cluster.CutReplication(t, master)
			const n = 20
			var answered []string
			for i := range n {
				key := fmt.Sprintf("k-%d", i)
				switch err := deduct(key); {
				case err == nil:
					answered = append(answered, key)
				case !errors.Is(err, quota.ErrUnavailable):
					t.Fatalf("deduct %s with the replica cut off: %v", key, err)
				}
			}
			dead, slot := cluster.KillMasterOf(t, "{7:USER:u-1}")
			promoted, _ := cluster.WaitNewMaster(t, slot, dead, 30*time.Second)
			restore()

			after := used()
			lost := int64(1+len(answered)) - after
			t.Logf("%s: %d of %d deducts answered 200 with the replica cut off; after %s died and %s took over, %d of them were no longer counted (u-1 at %d)",
				tc.name, len(answered), n, dead, promoted, lost, after)
			switch {
			case tc.replicas == 0 && (len(answered) != n || lost != n):
				t.Errorf("async: %d answered, %d lost; want all %d answered and lost (the cut did not hold back replication)", len(answered), lost, n)
			case tc.replicas > 0 && lost != 0:
				t.Errorf("replicated: %d deducts answered 200 were lost in the failover", lost)
			case tc.replicas > 0 && len(answered) != 0:
				t.Errorf("replicated: %d deducts answered 200 while no replica could acknowledge them", len(answered))
			}

			if tc.replicas > 0 {
				// The promoted master has no replica: with replicated its shard's writes answer
				// 503 until one is back, as the dead node is when an operator replaces it.
				if err := deduct("no-replica"); !errors.Is(err, quota.ErrUnavailable) {
					t.Errorf("replicated, the new master without a replica: %v; want ErrUnavailable", err)
				}
				cluster.RestartAsReplica(t, dead)
			}
			// Every idemKey is sent again, as a client does after a 503, or replayed: each ends
			// counted once, whether its record survived (answered from it) or was lost with its
			// counter (counted anew).
			for i := range n {
				key := fmt.Sprintf("k-%d", i)
				if err := eventually(10*time.Second, func() error { return deduct(key) }); err != nil {
					t.Fatalf("retry %s after the failover: %v", key, err)
				}
			}
			final := used()
			t.Logf("%s: retried after the failover, %d of the %d idemKeys were counted anew (their record was gone)", tc.name, final-after, n)
			want := int64(1 + n)
			if tc.replicas > 0 {
				if err := eventually(10*time.Second, func() error { return deduct("no-replica") }); err != nil {
					t.Fatalf("retry no-replica once a replica is back: %v", err)
				}
				final, want = used(), want+1
			}
			if final != want {
				t.Errorf("u-1 at %d after every idemKey was retried; want %d: each counted exactly once", final, want)
			}
			if tc.replicas == 0 {
				wantRejected(t, rec, "deducts answered 200 lost in the failover")
			}
		})
	}
}

// eventually calls f until it returns nil or within is over, and returns its last error.
func eventually(within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reloadOnFailure makes a test's cluster client read the slot map again after a failed call, as
// the backend's does (app's slotMapReloader): go-redis alone waits up to a minute.
type reloadOnFailure struct{ c *redis.ClusterClient }

func (r reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil {
			r.c.ReloadState(ctx)
		}
		return err
	}
}
func (r reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err != nil {
			r.c.ReloadState(ctx)
		}
		return err
	}
}

// replicated on a Redis with no replica cannot keep its promise: the service refuses to start,
// naming the setting and what to run instead.
func TestReplicatedRefusesARedisWithoutReplicas(t *testing.T) {
	e := newEnv(t, time.Now())
	cfg := e.cfg
	cfg.Durability = quota.Durability{MinReplicas: 1, Wait: 50 * time.Millisecond}
	_, err := quota.New(context.Background(), cfg)
	if err == nil {
		t.Fatal("started with replicated on a Redis without replicas")
	}
	for _, want := range []string{"VG_QUOTA_DURABILITY", "VG_QUOTA_MIN_REPLICAS=1", "0 replica(s)", "appendfsync always"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}
