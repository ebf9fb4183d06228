package quota_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest/history"
	"vouchergate/backend/quota"
	"vouchergate/testkit"
)

// With replicated, an answer given from a record is only as safe as the record: a retry that
// finds what an earlier attempt wrote, on a connection that wrote nothing since, still waits
// for a replica to have it. Here the first attempts (backend a) ran with the master cut off
// from its replica and were answered 503. Each retry runs on a backend of its own, whose one
// connection's last write was acknowledged before the cut, and is answered 503 too, not 200
// or ROLLED_BACK from a record a failover could still lose; once the replica is back they
// settle. The retry of the rolled-back deduct writes nothing: the touch in durable.go makes it
// wait on Redis releases that move a connection's WAIT offset only when it writes (Redis 7.0
// moves it on every command, so there it waits without the touch as well).
func TestReplicatedReplayWaitsForTheRecordItReplays(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis master and its replica")
	}
	master := testkit.StartRedis(t)
	testkit.StartRedis(t, testkit.RedisReplicaOf(master.Addr()))
	client := func(pool int) redis.UniversalClient {
		rdb := redis.NewClient(&redis.Options{Addr: master.Addr(), PoolSize: pool})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	e := newEnv(t, time.Now(), client(8))
	e.rule(t, 7, "USER", "ITEM:1001", 1000, calendar(t, quota.Day, "UTC"))
	cfg := e.cfg
	// a second: time enough for a replica to acknowledge on a loaded machine; a cut one never does
	cfg.Durability = quota.Durability{MinReplicas: 1, Wait: time.Second}
	a := e.start(t, cfg)
	rec := history.For(t)
	deduct := func(svc *quota.Service, key string) error {
		_, err := deductIn(rec, svc, 7, key, item("USER", "u-1", 1, "ITEM:1001"))
		return err
	}
	for _, key := range []string{"taken", "rolled-back"} {
		if err := deduct(a, key); err != nil {
			t.Fatalf("deduct %s: %v", key, err)
		}
	}
	cases := []struct {
		key, record string
		retry       *quota.Service
	}{
		{key: "rolled-back", record: "the rollback's mark, written on a (the retry writes nothing)"},
		{key: "cut", record: "the deduct's record, taken on a"},
		{key: "taken", record: "a record the replica has (the retry's own write is not acknowledged)"},
	}
	for i := range cases {
		cfg.Redis = client(1) // one connection, so its last write is known
		cases[i].retry = e.start(t, cfg)
		if err := deduct(cases[i].retry, fmt.Sprintf("own-%d", i)); err != nil {
			t.Fatalf("deduct on the backend of %s's retry: %v", cases[i].key, err)
		}
	}

	restore := testkit.CutReplication(t, master.Addr())
	if err := deduct(a, "cut"); !errors.Is(err, quota.ErrUnavailable) {
		t.Fatalf("deduct on a with the replica cut off: %v; want ErrUnavailable", err)
	}
	if _, err := rollbackIn(rec, a, 7, "rolled-back"); !errors.Is(err, quota.ErrUnavailable) {
		t.Fatalf("rollback on a with the replica cut off: %v; want ErrUnavailable", err)
	}
	for _, tc := range cases {
		if err := deduct(tc.retry, tc.key); !errors.Is(err, quota.ErrUnavailable) {
			t.Errorf("retry %s with the replica cut off, replaying %s: %v; want ErrUnavailable", tc.key, tc.record, err)
		}
	}
	restore()

	b := cases[0].retry
	if err := eventually(10*time.Second, func() error { return deduct(b, "cut") }); err != nil {
		t.Errorf("retry cut once the replica is back: %v", err)
	}
	if err := eventually(10*time.Second, func() error {
		_, err := rollbackIn(rec, b, 7, "rolled-back")
		return err
	}); err != nil {
		t.Errorf("retry the rollback once the replica is back: %v", err)
	}
	if err := deduct(b, "rolled-back"); !errors.Is(err, quota.ErrRolledBack) {
		t.Errorf("retry rolled-back once the replica is back: %v; want ErrRolledBack", err)
	}
	if _, err := usageIn(rec, b, 7, "USER", "u-1", []string{"ITEM:1001"}); err != nil {
		t.Errorf("usage of u-1: %v", err)
	}
	if u := e.used(t, 7, "USER", "u-1", "ITEM:1001", calendar(t, quota.Day, "UTC")); u != 5 {
		t.Errorf("u-1 at %d; want 5 (taken, cut and the three own-), each counted once", u)
	}
}
