package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/gate"
	"vouchergate/backend/voucher"
	"vouchergate/shared/keys"
	"vouchergate/testkit"
)

// versions reads a voucher's state and checks that each step moves its version as it should:
// up for every change of remaining or orders, not at all for a refusal or a no-op.
type versions struct {
	t    *testing.T
	g    *gate.Gate
	code string
	last uint64
}

func (v *versions) read() uint64 {
	v.t.Helper()
	snap, err := v.g.Snapshot(context.Background(), v.code)
	if err != nil {
		v.t.Fatalf("snapshot: %v", err)
	}
	return snap.Version
}

func (v *versions) raised(step string) {
	v.t.Helper()
	if now := v.read(); now <= v.last {
		v.t.Errorf("%s: version %d, not above %d", step, now, v.last)
	} else {
		v.last = now
	}
}

func (v *versions) kept(step string) {
	v.t.Helper()
	if now := v.read(); now != v.last {
		v.t.Errorf("%s: version %d, want it kept at %d", step, now, v.last)
	}
}

func singleRedis(t *testing.T) (redis.UniversalClient, string) {
	t.Helper()
	return testkit.Redis(t), testkit.RedisPrefix(t)
}

func TestEveryChangeRaisesTheVersion(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		rdb, prefix := singleRedis(t)
		checkVersions(t, rdb, prefix)
	})
	t.Run("cluster", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a Redis Cluster")
		}
		cluster := testkit.StartRedisCluster(t)
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
		t.Cleanup(func() { rdb.Close() })
		checkVersions(t, rdb, "")
	})
}

func checkVersions(t *testing.T, rdb redis.UniversalClient, prefix string) {
	ctx := context.Background()
	g := gate.New(rdb, prefix)
	v := voucher.Voucher{Code: "VER", TotalLimit: 2, PerUserLimit: 1}
	vs := &versions{t: t, g: g, code: v.Code}
	if snap, err := g.Snapshot(ctx, v.Code); err != nil || snap.Loaded || snap.Version != 0 {
		t.Fatalf("before loading: %+v %v; want not loaded, version 0", snap, err)
	}

	if _, err := g.Load(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	vs.raised("load")
	if _, err := g.Load(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	vs.kept("load of a loaded voucher")

	take := func(order, customer string) voucher.GateResult {
		t.Helper()
		r, err := g.Reserve(ctx, v, order, voucher.Holder{CustomerID: customer, ReservedAt: time.Now(), Attempt: "a"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	take("o-1", "c-1")
	vs.raised("reserve")
	take("o-1", "c-1")
	vs.kept("reserve of a held order")
	take("o-2", "c-1")
	vs.kept("reserve refused at the customer's limit")
	take("o-3", "c-3")
	vs.raised("reserve of the last use")
	if r := take("o-4", "c-4"); r.Outcome != voucher.GateOutOfStock {
		t.Fatalf("reserve with none left: %+v", r)
	}
	vs.kept("reserve refused out of stock")

	snap, err := g.Snapshot(ctx, v.Code)
	if err != nil || !snap.Loaded || snap.Remaining != 0 || len(snap.Orders) != 2 || snap.Version != vs.last {
		t.Fatalf("sold out: %+v %v; want loaded, 0 left, orders o-1 and o-3, version %d", snap, err, vs.last)
	}

	if released, _, err := g.Release(ctx, v.Code, "o-3", nil); err != nil || !released {
		t.Fatalf("release: %v %v", released, err)
	}
	vs.raised("release")
	if released, _, err := g.Release(ctx, v.Code, "o-3", nil); err != nil || released {
		t.Fatalf("release again: %v %v", released, err)
	}
	vs.kept("release of an order holding nothing")
	if snap, err := g.Snapshot(ctx, v.Code); err != nil || snap.Remaining != 1 || len(snap.Orders) != 0 {
		t.Fatalf("available: %+v %v; want 1 left and no orders read", snap, err)
	}

	lost := voucher.Redemption{VoucherCode: v.Code, OrderID: "o-5", CustomerID: "c-5", ReservedAt: time.Now()}
	if ok, err := g.PutBack(ctx, lost); err != nil || !ok {
		t.Fatalf("put back: %v %v", ok, err)
	}
	vs.raised("put back")
	if ok, err := g.PutBack(ctx, lost); err != nil || ok {
		t.Fatalf("put back again: %v %v", ok, err)
	}
	vs.kept("put back of an order held")

	if _, err := g.Recount(ctx, v); err != nil {
		t.Fatal(err)
	}
	vs.kept("recount that changes nothing")
	k := keys.ForVoucher(prefix, v.Code)
	if err := rdb.Set(ctx, k.Remaining, 7, 0).Err(); err != nil { // someone set it by hand
		t.Fatal(err)
	}
	if rc, err := g.Recount(ctx, v); err != nil || rc.After != 0 {
		t.Fatalf("recount: %+v %v", rc, err)
	}
	vs.raised("recount that fixes remaining")

	// Redis restarts empty: the version goes with the voucher, and the load that follows still
	// gets one above every version read before.
	if err := rdb.Del(ctx, k.Remaining, k.Users, k.Orders, k.Version).Err(); err != nil {
		t.Fatal(err)
	}
	if snap, err := g.Snapshot(ctx, v.Code); err != nil || snap.Loaded || snap.Version != 0 {
		t.Fatalf("after losing the voucher: %+v %v", snap, err)
	}
	if _, err := g.Load(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	vs.raised("load after Redis lost the voucher")

	// A failover to a replica that missed the latest changes: its version is behind what was
	// published, and the next change still goes above.
	if err := rdb.Set(ctx, k.Version, vs.last-1000, 0).Err(); err != nil {
		t.Fatal(err)
	}
	take("o-6", "c-6")
	vs.raised("reserve after the version went back")
}
