package faulttest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
	"vouchergate/shared/keys"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// How far beyond the cluster's own failover time a shard's vouchers may keep answering 503
// (issue 15 asks for about a second; the margin is for -race on a shared two-core machine).
const failoverSlack = 1500 * time.Millisecond

// Thirty flash vouchers spread over a replicated Redis Cluster's three masters sell at once to
// a hundred concurrent buyers. Mid-sale the master holding some of them is SIGKILLed; its
// replica takes over. The vouchers on that shard answer 503 with Retry-After only while the
// slot has no master: the backend sees the new master at most failoverSlack after the cluster
// has promoted it. The other shards' vouchers never answer 503 (the cluster runs with
// cluster-require-full-coverage no). Nothing is over-allocated; after reconciliation every voucher's Redis state
// equals the database, the rest of each voucher sells exactly, and every granted order's retry
// answers 201.
func TestRedisClusterMasterFailoverMidSale(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a replicated Redis Cluster")
	}
	cluster := testkit.StartReplicatedRedisCluster(t)
	b, clock, c := startBackend(t, func(cfg *config.Backend) { cfg.RedisClusterAddrs = cluster.Addrs() })
	failoverMidSale(t, cluster, b, clock, []*client{c}, c)
}

// failoverMidSale runs the failover scenario on vouchers created through b, sold through
// fronts (a backend, or the edges of a stack), reconciled, with b's clock moved past the grace
// period, and sold to the end through admin (b's client); every granted order is retried
// through each front.
func failoverMidSale(t *testing.T, cluster *testkit.RedisCluster, b *backendtest.Backend, clock *testkit.OffsetClock, fronts []*client, admin *client) {
	t.Helper()
	const vouchers, total = 30, 60
	codes := make([]string, vouchers)
	shardOf := map[string]string{} // code -> the address of its slot's master
	for i := range codes {
		codes[i] = fmt.Sprintf("FAILOVER-%02d", i)
		createFlash(t, b, codes[i], total, 1)
		key := keys.ForVoucher(b.Config.RedisPrefix, codes[i]).Remaining
		shardOf[codes[i]] = cluster.MasterOf(cluster.KeySlot(t, key))
	}
	masters := map[string]int{}
	for _, m := range shardOf {
		masters[m]++
	}
	if len(masters) != 3 || masters[""] > 0 {
		t.Fatalf("the vouchers' slots are served by %v; want all three masters", masters)
	}

	buyers := startBuyers(fronts, codes, 100)
	buyers.waitGranted(t, vouchers*total/4)
	dead, slot := cluster.KillMasterOf(t, keys.ForVoucher(b.Config.RedisPrefix, codes[0]).Remaining)
	killedAt := time.Now()
	_, promotedAt := cluster.WaitNewMaster(t, slot, dead, 30*time.Second)
	failover := promotedAt.Sub(killedAt)
	onDead := map[string]bool{}
	for code, m := range shardOf {
		onDead[code] = m == dead
	}
	buyers.waitSoldOut(t, codes, 2*time.Minute)
	buys := buyers.stop()

	// The 503 window of the dead master's vouchers: from the kill to the last 503 answered.
	var lastUnavailable time.Time
	unavailable, elsewhere := 0, 0
	for _, o := range buys {
		if o.status != 503 {
			continue
		}
		if o.retryAfter == "" {
			t.Errorf("order %s of %s: 503 %s without Retry-After", o.order, o.voucher, o.code)
		}
		if !onDead[o.voucher] {
			elsewhere++
			continue
		}
		unavailable++
		if o.answeredAt.After(lastUnavailable) {
			lastUnavailable = o.answeredAt
		}
	}
	window := lastUnavailable.Sub(killedAt)
	t.Logf("killed %s (slot %d, %d of %d vouchers): the cluster promoted its replica after %s; its vouchers answered 503 until %s after the kill (%d answers; %d 503s on the other shards)",
		dead, slot, masters[dead], vouchers, failover.Round(time.Millisecond), window.Round(time.Millisecond), unavailable, elsewhere)
	if elsewhere > 0 {
		t.Errorf("%d reservations of vouchers on the live masters answered 503; their slots never lost a master", elsewhere)
	}
	if unavailable == 0 {
		t.Errorf("no reservation of the dead master's vouchers answered 503: the buyers did not meet the failover")
	}
	if window-failover > failoverSlack {
		t.Errorf("the dead master's vouchers answered 503 for %s after the kill, %s beyond the cluster's failover (%s); want at most %s beyond",
			window.Round(time.Millisecond), (window - failover).Round(time.Millisecond), failover.Round(time.Millisecond), failoverSlack)
	}

	granted := map[string][]string{}
	for _, code := range codes {
		granted[code] = checkAnswers(t, b.App.Pool, code, buys.of(code))
		checkNoOverAllocation(t, b.App.Pool, code)
	}
	customerOf := customers(buys.outcomes())
	clock.Advance(b.Config.ReconcileGrace + time.Minute)
	for _, code := range codes {
		reconcile(t, admin, code)
		b.CheckInvariants(t, code, granted[code])
		checkRedisEqualsDB(t, b, code)
	}
	for _, code := range codes {
		prefix := "rest-" + code + "-"
		more := sellRest(t, admin, b.App.Pool, code, prefix)
		for _, o := range more {
			customerOf[o] = strings.Replace(o, prefix+"o", prefix+"c", 1)
		}
		granted[code] = append(granted[code], more...)
		b.CheckInvariants(t, code, granted[code])
		checkRedisEqualsDB(t, b, code)
		for _, front := range fronts {
			retryGranted(t, front, code, granted[code], customerOf)
		}
	}
}

// buy is one buyer's single request for one voucher, and the client it went through.
type buy struct {
	outcome
	voucher string
	via     int
}

type buys []buy

func (bs buys) of(code string) []outcome {
	var list []outcome
	for _, b := range bs {
		if b.voucher == code {
			list = append(list, b.outcome)
		}
	}
	return list
}

func (bs buys) outcomes() []outcome {
	list := make([]outcome, len(bs))
	for i, b := range bs {
		list[i] = b.outcome
	}
	return list
}

// buyers are workers that each send one reservation at a time, a new customer and order each,
// cycling over the vouchers and over the clients (the front doors), until stopped. Nobody
// retries: each request's answer is recorded as it came.
type buyers struct {
	quit    chan struct{}
	wg      sync.WaitGroup
	granted atomic.Int64

	mu      sync.Mutex
	buys    buys
	soldOut map[string]bool // vouchers that answered OUT_OF_STOCK
}

var once = policy{tries: 1, timeout: func(int) time.Duration { return 30 * time.Second }}

func startBuyers(clients []*client, codes []string, workers int) *buyers {
	bs := &buyers{quit: make(chan struct{}), soldOut: map[string]bool{}}
	var next atomic.Int64
	for range workers {
		bs.wg.Add(1)
		go func() {
			defer bs.wg.Done()
			for {
				select {
				case <-bs.quit:
					return
				default:
				}
				n := next.Add(1)
				code, via := codes[int(n)%len(codes)], int(n/int64(len(codes)))%len(clients)
				o := clients[via].reserveOrder(code, attempt{customer: fmt.Sprintf("c%d", n), order: fmt.Sprintf("o%d", n)}, once)
				if o.status == 201 {
					bs.granted.Add(1)
				}
				bs.mu.Lock()
				bs.buys = append(bs.buys, buy{outcome: o, voucher: code, via: via})
				if o.status == 409 && o.code == wire.CodeOutOfStock {
					bs.soldOut[code] = true
				}
				bs.mu.Unlock()
			}
		}()
	}
	return bs
}

// waitGranted returns once the buyers were answered n 201s.
func (bs *buyers) waitGranted(t *testing.T, n int64) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("%d reservations granted", n), func() bool { return bs.granted.Load() >= n })
}

// waitSoldOut returns once every voucher has answered OUT_OF_STOCK, and fails the test after
// bound.
func (bs *buyers) waitSoldOut(t *testing.T, codes []string, bound time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(bound); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		bs.mu.Lock()
		n := len(bs.soldOut)
		bs.mu.Unlock()
		if n == len(codes) {
			return
		}
	}
	bs.stop()
	t.Fatalf("not every voucher sold out within %s", bound)
}

// stop ends the buyers and returns every answer they got.
func (bs *buyers) stop() buys {
	select {
	case <-bs.quit:
	default:
		close(bs.quit)
	}
	bs.wg.Wait()
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return bs.buys
}
