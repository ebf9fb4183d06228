package quota_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/quota"
	"vouchergate/testkit"
)

// With VG_QUOTA_DURABILITY=replicated every quota write waits for its replica: deduct, whole and
// partial rollback and reset are answered while the replica acknowledges, and each answers
// ErrUnavailable (not acknowledged) once it is gone; a reset then stays on record as UNKNOWN.
func TestEveryQuotaWriteWaitsForItsReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a master and a replica")
	}
	masterSrv, _ := ownRedis(t)
	// A read deadline well past WAIT's, so a write the replica does not acknowledge is told by
	// WAIT and not by the client giving up first.
	rdb := redis.NewClient(&redis.Options{Addr: masterSrv.Addr(), MaxRetries: -1, ReadTimeout: 3 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	replicaSrv, replica := ownRedis(t)
	host, port, _ := strings.Cut(rdb.Options().Addr, ":")
	if err := replica.Do(t.Context(), "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	connected := func() string {
		info, _ := rdb.Info(t.Context(), "replication").Result()
		return info
	}
	testkit.Eventually(t, "the replica connected and in sync", func() bool {
		return strings.Contains(connected(), "connected_slaves:1") && strings.Contains(connected(), "state=online")
	})
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
	cfg := e.cfg
	// A second for the replica's acknowledgement: 100 ms missed on a loaded machine under -race.
	cfg.Durability = quota.Durability{MinReplicas: 1, Wait: time.Second}
	day := calendar(t, quota.Day, "UTC")
	e.rule(t, 1, "USER", "ITEM:1", 100, day)
	svc := e.start(t, cfg)
	ctx := t.Context()
	items := []quota.Item{item("USER", "u", 3, "ITEM:1")}
	writes := func() []error {
		_, err1 := svc.Deduct(ctx, 1, "k-"+time.Now().String(), items)
		_, err2 := svc.RollbackItems(ctx, 1, "k", "r-"+time.Now().String(), []quota.Item{item("USER", "u", 1, "ITEM:1")})
		_, err3 := svc.ResetCounters(ctx, 1, "USER", "u", "")
		_, err4 := svc.Rollback(ctx, 1, "k")
		return []error{err1, err2, err3, err4}
	}
	if _, err := svc.Deduct(ctx, 1, "k", items); err != nil {
		t.Fatal(err)
	}
	for i, err := range writes() {
		if err != nil {
			t.Fatalf("write %d with the replica up: %v", i, err)
		}
	}
	replicaSrv.Kill()
	testkit.Eventually(t, "the master seeing its replica gone", func() bool { return strings.Contains(connected(), "connected_slaves:0") })
	for i, err := range writes() {
		if !errors.Is(err, quota.ErrUnavailable) || !errors.Is(err, quota.ErrNotReplicated) {
			t.Errorf("write %d (deduct, partial rollback, reset, rollback) without its replica: %v; want ErrUnavailable, not replicated", i, err)
		}
	}
	list, err := svc.Resets(ctx, 1, "USER", "u", 1)
	if err != nil || len(list) != 1 || list[0].Outcome != quota.ResetUnknown {
		t.Fatalf("the reset without its replica: %+v %v; want on record as UNKNOWN", list, err)
	}
}
