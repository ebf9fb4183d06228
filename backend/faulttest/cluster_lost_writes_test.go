package faulttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
	"vouchergate/shared/events"
	"vouchergate/shared/keys"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// A flash voucher's Redis master is cut off from its replica (loopback iptables) while a
// release and a sell-out go through it, then SIGKILLed; the replica, which has neither, takes
// over. So the new master holds a use for the released order (a lost release) and none for
// the orders granted meanwhile (lost takes), and counts uses left that the database has sold.
//
// What that costs, as the test finds it: nothing is sold twice (new buyers pass the gate and
// are refused by the database, each use given back: 409). The sold-out state published before
// the failover stays in the bucket, through the new master's takes and give-backs, until a
// change publishes (here the new master selling its last use); but the backend's own reading
// of the state, which an edge asks for after a 409 passes it, follows the new master: not sold
// out while it counts the lost uses as left, so an edge that asks keeps forwarding new orders
// for the database to refuse. Every granted order's retry gets 201 with its discount from its
// row: taking a use anew while Redis has one left, and once none is (the lost release holds
// one), from its row with its hold put back, because the backend's cluster client saw the
// master go (voucher/suspect.go). After reconciliation Redis equals the database, the
// backend's state and the bucket's say sold out, the bucket's holding every granted order,
// nothing more sells, and every granted order's retry answers 201.
func TestRedisClusterFailoverLosesFlashWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a replicated Redis Cluster")
	}
	cluster := testkit.StartReplicatedRedisCluster(t)
	b, clock, c := startBackend(t, func(cfg *config.Backend) { cfg.RedisClusterAddrs = cluster.Addrs() })
	const code, total = "LOST-WRITES", 20
	createFlash(t, b, code, total, 1)
	nc, err := nats.Connect(b.Config.NATSURL, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	names := events.Names{Prefix: b.Config.NATSPrefix}
	remainingKey := keys.ForVoucher(b.Config.RedisPrefix, code).Remaining
	master := cluster.MasterOf(cluster.KeySlot(t, remainingKey))

	var sold []outcome // every first answer to an order, for checkAnswers
	buy := func(prefix string, n int) (granted []string) {
		for i := range n {
			o := c.reserveOrder(code, attempt{customer: fmt.Sprintf("%s-c%d", prefix, i), order: fmt.Sprintf("%s-o%d", prefix, i)}, patient)
			sold = append(sold, o)
			switch {
			case o.status == 201:
				granted = append(granted, o.order)
			case o.status != 409 || o.code != wire.CodeOutOfStock:
				t.Fatalf("order %s: %d %s; want 201 or 409 OUT_OF_STOCK", o.order, o.status, o.code)
			}
		}
		return granted
	}
	before := buy("a", 6)
	testkit.WaitReplicated(t, master)
	restore := cluster.CutReplication(t, master)
	if a, raw := c.send("DELETE", "/vouchers/"+code+"/reservations/"+before[0], nil, 30*time.Second); a.status != 200 {
		t.Fatalf("release %s with the replica cut off: %d %s", before[0], a.status, raw)
	}
	during := buy("b", 25)
	published := backendtest.WaitBucketState(t, nc, names, code, true)
	dead, slot := cluster.KillMasterOf(t, remainingKey)
	promoted, _ := cluster.WaitNewMaster(t, slot, dead, 30*time.Second)
	restore()

	granted := append(append([]string{}, before[1:]...), during...)
	lostTakes, lostReleases := lostWrites(t, promoted, b.Config.RedisPrefix, code, before[0], granted)
	t.Logf("with the replica cut off %s released %s and granted %d orders, then sold out; %s took over holding %d uses too few for the rows (lost takes: %d, lost releases: %d)",
		dead, before[0], len(during), promoted, lostTakes-lostReleases, lostTakes, lostReleases)
	if len(during) != total-len(before)+1 || lostTakes != len(during) || lostReleases != 1 {
		t.Fatalf("%d granted with the replica cut off, %d takes and %d releases lost; want %d, all of them, and 1 (the cut did not hold back replication)",
			len(during), lostTakes, lostReleases, total-len(before)+1)
	}

	secondWinners(t, b, c, code, total)
	if st := backendState(t, c, code); st.SoldOut {
		t.Errorf("the backend's state for an edge after the failover: sold out; want not sold out, as DESIGN says: it follows the new master, which counts the lost uses as left")
	}
	if st := bucketState(t, nc, names, code); !st.SoldOut || st.Version != published.Version {
		t.Errorf("the bucket after the new master's takes and give-backs: sold out %v, version %d; want the state published before the failover (sold out, %d)",
			st.SoldOut, st.Version, published.Version)
	}
	var kept []outcome // the order released is answered by its release, not its 201
	for _, o := range sold {
		if o.order != before[0] {
			kept = append(kept, o)
		}
	}
	if got := checkAnswers(t, b.App.Pool, code, kept); !sameSet(got, granted) {
		t.Errorf("granted orders by the answers: %v; want %v", got, granted)
	}
	checkNoOverAllocation(t, b.App.Pool, code)

	// Every granted order retried before reconciliation, in the order granted.
	customerOf := customers(sold)
	refused := 0
	for _, order := range granted {
		o := c.reserveOrder(code, attempt{customer: customerOf[order], order: order}, patient)
		switch {
		case o.status == 201 && o.discount == discount:
		case o.status == 409 && o.code == wire.CodeOutOfStock:
			refused++
		default:
			t.Errorf("granted order %s retried after the failover: %d %s (discount %d)", order, o.status, o.code, o.discount)
		}
	}
	t.Logf("before reconciliation %d of %d granted orders retried were answered 201 from their row, %d OUT_OF_STOCK", len(granted)-refused, len(granted), refused)
	if refused > 0 {
		// the gate may have no use left for them (a lost release still holds one), but the
		// backend saw the master go: its refusals look at the database until reconciliation
		t.Errorf("%d granted orders' retries answered OUT_OF_STOCK before reconciliation; want every one answered from its row", refused)
	}
	// the backend publishes the sell-out after the answer that made it (at most one a
	// VG_SOLDOUT_EVERY), so the bucket shows it a moment later
	testkit.Eventually(t, "the bucket to hold the new master's sell-out, newer than the state before the failover", func() bool {
		st := bucketState(t, nc, names, code)
		return st.SoldOut && st.Version > published.Version
	})
	checkNoOverAllocation(t, b.App.Pool, code)

	clock.Advance(b.Config.ReconcileGrace + time.Minute)
	rep := reconcile(t, c, code)
	if !sameSet(rep.Released, before[:1]) {
		t.Errorf("reconciliation released %v; want the hold of the order released with the replica cut off, %s", rep.Released, before[0])
	}
	b.CheckInvariants(t, code, granted)
	checkRedisEqualsDB(t, b, code)
	if st := backendState(t, c, code); !st.SoldOut {
		t.Errorf("the backend's state for an edge after reconciliation: not sold out; want sold out")
	}
	st := backendtest.WaitBucketState(t, nc, names, code, true)
	for _, order := range granted {
		if !st.Holders.MayHold([]byte(order)) {
			t.Errorf("the sold-out state in the bucket after reconciliation does not hold granted order %s", order)
		}
	}
	if more := sellRest(t, c, b.App.Pool, code, "rest-"); len(more) != 0 {
		t.Errorf("sold out, yet %d more orders were granted after the failover", len(more))
	}
	retryGranted(t, c, code, granted, customerOf)
	b.CheckInvariants(t, code, granted)
}

// lostWrites reads the voucher's gate on the node that took over and counts the granted
// orders it does not hold (lost takes) and whether it still holds the released order (a lost
// release).
func lostWrites(t *testing.T, addr, prefix, code, released string, granted []string) (takes, releases int) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	g := backendtest.ReadGate(t, rdb, prefix, code)
	for _, order := range granted {
		if _, ok := g.Orders[order]; !ok {
			takes++
		}
	}
	if _, ok := g.Orders[released]; ok {
		releases++
	}
	t.Logf("%s after the failover: %d uses left, %d orders held", addr, g.Remaining, len(g.Orders))
	return takes, releases
}

// secondWinners sends new buyers while the new master counts uses the database has sold: each
// passes the gate, is refused by the database and answered 409 OUT_OF_STOCK, its use given
// back (a compensation).
func secondWinners(t *testing.T, b *backendtest.Backend, c *client, code string, total int) {
	t.Helper()
	compensated := func() float64 {
		m := testkit.ScrapeMetrics(t, b.OpsURL+"/metrics")
		if !m.Has("vouchergate_compensations_total", "result", "released") {
			return 0
		}
		return m.Value(t, "vouchergate_compensations_total", "result", "released")
	}
	before := compensated()
	const n = 10
	for i := range n {
		o := c.reserveOrder(code, attempt{customer: fmt.Sprintf("n-c%d", i), order: fmt.Sprintf("n-o%d", i)}, patient)
		if o.status != 409 || o.code != wire.CodeOutOfStock {
			t.Errorf("new order %s after the failover, the database full: %d %s; want 409 OUT_OF_STOCK", o.order, o.status, o.code)
		}
	}
	if got := compensated() - before; got != n {
		t.Errorf("%v compensating releases for the %d new orders; want one each (the gate let them through)", got, n)
	}
	if active := len(active(rows(t, b.App.Pool, code))); active != total {
		t.Errorf("%d active rows after the new orders; want total_limit %d", active, total)
	}
}

// backendState reads the voucher's state from the backend, as an edge asks for it after a 409
// passes it.
func backendState(t *testing.T, c *client, code string) events.VoucherState {
	t.Helper()
	a, raw := c.send("GET", "/vouchers/"+code+"/state", nil, 10*time.Second)
	st, err := events.DecodeVoucherState(raw)
	if a.status != 200 || err != nil {
		t.Fatalf("GET /vouchers/%s/state: %d %s (%v)", code, a.status, raw, err)
	}
	t.Logf("the backend's state for an edge: sold out %v, version %d", st.SoldOut, st.Version)
	return st
}

// bucketState reads the voucher's state in the sold-out bucket, as an edge starting now would.
func bucketState(t *testing.T, nc *nats.Conn, names events.Names, code string) events.VoucherState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, names.StateBucket())
	if err != nil {
		t.Fatalf("bucket %s: %v", names.StateBucket(), err)
	}
	e, err := kv.Get(ctx, code)
	if err != nil {
		t.Fatalf("bucket %s key %s: %v", names.StateBucket(), code, err)
	}
	st, err := events.DecodeVoucherState(e.Value())
	if err != nil {
		t.Fatalf("bucket %s key %s: %v", names.StateBucket(), code, err)
	}
	return st
}
