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

// failoverEnv is a quota service on a replicated Redis Cluster, deducting for one identity
// (u-1, one ITEM:1001 a deduct, 1000 a day), whose master the tests cut off and kill.
type failoverEnv struct {
	cluster *testkit.RedisCluster
	svc     *quota.Service
	// rec records what the clients were told, checked for linearizability as the test ends;
	// with async, whose answered writes are lost, a recorder of the test's own that must be
	// rejected (wantRejected)
	rec *history.Recorder
}

// startFailoverEnv starts the cluster and a service waiting for replicas acknowledgements
// (0: async).
func startFailoverEnv(t *testing.T, replicas int) *failoverEnv {
	t.Helper()
	cluster := testkit.StartReplicatedRedisCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), ReadTimeout: 2 * time.Second})
	rdb.AddHook(reloadOnFailure{rdb})
	t.Cleanup(func() { rdb.Close() })
	e := newEnv(t, time.Now(), rdb)
	cfg := e.cfg
	cfg.Durability = quota.Durability{MinReplicas: replicas, Wait: 200 * time.Millisecond}
	e.rule(t, 7, "USER", "ITEM:1001", 1000, calendar(t, quota.Day, "UTC"))
	rec := history.For(t)
	if replicas == 0 {
		rec = history.NewRecorder() // answered writes are lost: the history must be rejected
	}
	return &failoverEnv{cluster: cluster, svc: e.start(t, cfg), rec: rec} // reads the rule at start
}

func (f *failoverEnv) deduct(key string) (quota.DeductResult, error) {
	return deductIn(f.rec, f.svc, 7, key, item("USER", "u-1", 1, "ITEM:1001"))
}

func (f *failoverEnv) rollback(key string) (quota.RollbackResult, error) {
	return rollbackIn(f.rec, f.svc, 7, key)
}

// used is u-1's counter, waiting out a cluster still electing its new master.
func (f *failoverEnv) used(t *testing.T) int64 {
	t.Helper()
	var cs []quota.Counter
	err := eventually(10*time.Second, func() (err error) {
		cs, err = usageIn(f.rec, f.svc, 7, "USER", "u-1", []string{"ITEM:1001"})
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

// master is the address of u-1's master.
func (f *failoverEnv) master(t *testing.T) string {
	t.Helper()
	return f.cluster.MasterOf(f.cluster.KeySlot(t, "{7:USER:u-1}"))
}

// failover SIGKILLs u-1's master and returns it and its promoted replica once the cluster
// has it.
func (f *failoverEnv) failover(t *testing.T) (dead, promoted string) {
	t.Helper()
	dead, slot := f.cluster.KillMasterOf(t, "{7:USER:u-1}")
	promoted, _ = f.cluster.WaitNewMaster(t, slot, dead, 30*time.Second)
	return dead, promoted
}

// Deducts for one identity are answered while its Redis master's link to its replica is cut
// (loopback iptables), then the master is SIGKILLed and the replica, which never received
// them, is promoted. With VG_QUOTA_DURABILITY=async every deduct answered 200 is lost with its
// idemKey record: the customer's limit starts over (the test measures it and requires it, so
// the harness is known to bite). With replicated each of them waits for a replica that never
// acknowledges and is answered 503, and no deduct answered 200 is lost. Either way every
// idemKey retried after the failover ends counted exactly once: those answered 200 before the
// cut replay their first answer from the record, the others are counted anew.
func TestQuotaClusterFailoverDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a replicated Redis Cluster")
	}
	for _, tc := range []struct {
		name     string
		replicas int
	}{{"async", 0}, {"replicated", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFailoverEnv(t, tc.replicas)
			const m, n = 5, 20
			first := map[string]int64{} // idemKey -> u-1's counter in its 200
			for i := range m {
				key := fmt.Sprintf("a-%d", i)
				// Retried as a client would: on a loaded machine a replica may miss the
				// acknowledgement's deadline, and the retry answers from the record.
				var res quota.DeductResult
				err := eventually(10*time.Second, func() (err error) { res, err = f.deduct(key); return err })
				if err != nil {
					t.Fatalf("deduct %s before the cut: %v", key, err)
				}
				first[key] = res.Counters[0].Used
			}
			master := f.master(t)
			testkit.WaitReplicated(t, master) // with async too: the cut holds back only what follows
			restore := f.cluster.CutReplication(t, master)
			var answered []string
			for i := range n {
				key := fmt.Sprintf("k-%d", i)
				switch _, err := f.deduct(key); {
				case err == nil:
					answered = append(answered, key)
				case !errors.Is(err, quota.ErrUnavailable):
					t.Fatalf("deduct %s with the replica cut off: %v", key, err)
				}
			}
			dead, promoted := f.failover(t)
			restore()

			after := f.used(t)
			lost := int64(m+len(answered)) - after
			t.Logf("%s: %d of %d deducts answered 200 with the replica cut off; after %s died and %s took over, %d answered deducts were no longer counted (u-1 at %d)",
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
				if _, err := f.deduct("no-replica"); !errors.Is(err, quota.ErrUnavailable) {
					t.Errorf("replicated, the new master without a replica: %v; want ErrUnavailable", err)
				}
				f.cluster.RestartAsReplica(t, dead)
			}
			// Every idemKey is sent again, as a client does after a 503 or a lost answer.
			for key, want := range first {
				var res quota.DeductResult
				err := eventually(10*time.Second, func() (err error) { res, err = f.deduct(key); return err })
				if err != nil {
					t.Fatalf("retry %s, answered 200 before the cut, after the failover: %v", key, err)
				}
				if got := res.Counters[0].Used; got != want {
					t.Errorf("retry %s after the failover answered u-1 at %d; its first answer said %d (not answered from its record)", key, got, want)
				}
			}
			if u := f.used(t); u != after {
				t.Errorf("u-1 at %d after the retries of the deducts answered before the cut, %d before them: counted again", u, after)
			}
			for i := range n {
				key := fmt.Sprintf("k-%d", i)
				if err := eventually(10*time.Second, func() error { _, err := f.deduct(key); return err }); err != nil {
					t.Fatalf("retry %s after the failover: %v", key, err)
				}
			}
			final := f.used(t)
			t.Logf("%s: retried after the failover, %d of the %d idemKeys sent with the replica cut off were counted anew (their record was gone)", tc.name, final-after, n)
			want := int64(m + n)
			if tc.replicas > 0 {
				if err := eventually(10*time.Second, func() error { _, err := f.deduct("no-replica"); return err }); err != nil {
					t.Fatalf("retry no-replica once a replica is back: %v", err)
				}
				final, want = f.used(t), want+1
			}
			if final != want {
				t.Errorf("u-1 at %d after every idemKey was retried; want %d: each counted exactly once", final, want)
			}
			if tc.replicas == 0 {
				wantRejected(t, f.rec, "deducts answered 200 lost in the failover")
			}
		})
	}
}

// A rollback sent while the identity's master is cut off from its replica, then the failover.
// With async it is answered 200 and lost: the deduct it gave back counts again (measured and
// required, as above). With replicated it is answered 503, and a rollback answered 200 before
// the cut is still in force after the failover. Either way the client's retry of the rollback
// gives back once, and the deducts rolled back stay refused.
func TestQuotaClusterFailoverRollbackDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a replicated Redis Cluster")
	}
	for _, tc := range []struct {
		name     string
		replicas int
	}{{"async", 0}, {"replicated", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFailoverEnv(t, tc.replicas)
			// Retried as a client would before the cut: on a loaded machine a replica may miss
			// the acknowledgement's deadline.
			for _, key := range []string{"r-0", "r-1", "r-2"} {
				if err := eventually(10*time.Second, func() error { _, err := f.deduct(key); return err }); err != nil {
					t.Fatalf("deduct %s: %v", key, err)
				}
			}
			if err := eventually(10*time.Second, func() error { _, err := f.rollback("r-0"); return err }); err != nil {
				t.Fatalf("rollback r-0 before the cut: %v", err)
			}
			if u := f.used(t); u != 2 {
				t.Fatalf("u-1 at %d after r-0's rollback before the cut; want 2", u)
			}
			master := f.master(t)
			testkit.WaitReplicated(t, master)
			restore := f.cluster.CutReplication(t, master)
			_, err := f.rollback("r-1")
			switch {
			case tc.replicas == 0 && err != nil:
				t.Fatalf("async: rollback r-1 with the replica cut off: %v", err)
			case tc.replicas > 0 && !errors.Is(err, quota.ErrUnavailable):
				t.Fatalf("replicated: rollback r-1 with the replica cut off: %v; want ErrUnavailable", err)
			}
			dead, promoted := f.failover(t)
			restore()
			if tc.replicas > 0 {
				f.cluster.RestartAsReplica(t, dead)
			}

			// r-2 counts; r-0's rollback, answered before the cut, holds; r-1 counts unless
			// its rollback survived, which only an answer after the cut could have lost.
			after := f.used(t)
			t.Logf("%s: rollback r-1 answered %v with the replica cut off; after %s died and %s took over, u-1 at %d", tc.name, err, dead, promoted, after)
			switch {
			case tc.replicas == 0 && after != 2:
				t.Errorf("async: u-1 at %d after the failover; want 2: the rollback answered 200 with the replica cut off lost (the cut did not hold back replication)", after)
			case tc.replicas > 0 && after != 2:
				t.Errorf("replicated: u-1 at %d after the failover; want 2 (r-1, whose rollback was answered 503, and r-2)", after)
			}
			var got quota.RollbackResult
			if err := eventually(10*time.Second, func() (err error) { got, err = f.rollback("r-1"); return err }); err != nil {
				t.Fatalf("retry rollback r-1 after the failover: %v", err)
			}
			if len(got.Returned) != 1 || got.Returned[0].Amount != 1 {
				t.Errorf("retry rollback r-1 after the failover gave back %+v; want 1", got.Returned)
			}
			if got, err := f.rollback("r-1"); err != nil || len(got.Returned) != 0 {
				t.Errorf("rollback r-1 once more: %+v %v; want nothing given back", got, err)
			}
			for _, key := range []string{"r-0", "r-1"} {
				if _, err := f.deduct(key); !errors.Is(err, quota.ErrRolledBack) {
					t.Errorf("deduct %s, rolled back, retried after the failover: %v; want ErrRolledBack", key, err)
				}
			}
			if u := f.used(t); u != 1 {
				t.Errorf("u-1 at %d at the end; want 1 (r-2): each deduct and rollback counted once", u)
			}
			if tc.replicas == 0 {
				wantRejected(t, f.rec, "a rollback answered 200 lost in the failover")
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
// naming the setting, what to run instead and what that costs.
func TestReplicatedRefusesARedisWithoutReplicas(t *testing.T) {
	e := newEnv(t, time.Now())
	cfg := e.cfg
	cfg.Durability = quota.Durability{MinReplicas: 1, Wait: 50 * time.Millisecond}
	_, err := quota.New(context.Background(), cfg)
	if err == nil {
		t.Fatal("started with replicated on a Redis without replicas")
	}
	for _, want := range []string{"VG_QUOTA_DURABILITY", "VG_QUOTA_MIN_REPLICAS=1", "0 replica(s)", "appendfsync always", "deducts per second"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}

// Nor does it start when Redis cannot be asked how many replicas it has: the promise would go
// unchecked.
func TestReplicatedRefusesARedisItCannotAsk(t *testing.T) {
	srv := testkit.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	e := newEnv(t, time.Now(), rdb)
	srv.Kill()
	cfg := e.cfg
	cfg.Durability = quota.Durability{MinReplicas: 1, Wait: 50 * time.Millisecond}
	svc, err := quota.New(context.Background(), cfg)
	if err == nil {
		svc.Close()
		t.Fatal("started with replicated on a Redis that did not answer")
	}
	for _, want := range []string{"VG_QUOTA_DURABILITY", "could not be counted", "async"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}
