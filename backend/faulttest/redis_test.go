package faulttest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
	"vouchergate/shared/keys"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// Redis is killed mid-sale and comes back empty. The next reservations load the voucher from
// the database again: the first state Redis shows holds no more uses than total_limit minus
// the rows active when it died (a load from total_limit alone would hold them all). No 201 is
// lost, nothing is sold twice; after reconciliation Redis equals the database and the voucher
// sells exactly its remaining uses. The reconciliation job runs every 200ms through the sale.
// Once sold out, an empty Redis is loaded again as sold out by the warm-up endpoint and by the
// warm-up job.
func TestRedisRestartedEmptyMidSale(t *testing.T) {
	rs := testkit.StartRedis(t)
	b, clock, c := startBackend(t, func(cfg *config.Backend) { cfg.RedisURL = rs.URL() })
	const code, total = "REDIS-EMPTY", 150
	createFlash(t, b, code, total, 2)

	attempts := storm("", 600, 1)
	s := startSale(attempts, 48, func(a attempt) outcome { return c.reserveOrder(code, a, patient) })
	reconciling := reconcileEvery(b, 200*time.Millisecond, s.done)
	s.waitGranted(t, total/3)
	s.running(t, "kill redis")
	met := c.unavailable.Load()
	rs.Kill()
	activeAtKill := len(active(rows(t, b.App.Pool, code)))
	c.waitUnavailable(t, met, 20, "clients meet the dead Redis: 503, and retry")
	rs.RestartEmpty()

	first := firstLoad(t, rs.Addr(), b.Config.RedisPrefix, code)
	if first+int64(activeAtKill) > total {
		t.Errorf("redis came back with %d uses left; total_limit %d minus %d rows active when it died allows at most %d: not loaded from the database",
			first, total, activeAtKill, total-activeAtKill)
	}
	t.Logf("%d rows active when redis died; the first load holds %d uses left", activeAtKill, first)

	outcomes := settle(t, c, code, s.wait(t))
	<-reconciling
	t.Logf("%s", tally(outcomes))
	granted := checkAnswers(t, b.App.Pool, code, outcomes)
	checkNoOverAllocation(t, b.App.Pool, code)
	finish(t, b, clock, c, code, granted, customers(outcomes))

	// Sold out now: an empty Redis loaded by the warm-up endpoint holds no use left, and a late
	// crowd is refused.
	rs.RestartEmpty()
	var view wire.VoucherView
	testkit.Eventually(t, "warm-up of the sold-out voucher answered 200 once redis came back empty", func() bool {
		a, raw := c.send("POST", "/admin/vouchers/"+code+"/warmup", nil, 10*time.Second)
		return a.status == 200 && json.Unmarshal(raw, &view) == nil // 503 until the pool redials
	})
	if view.RedisRemaining == nil || *view.RedisRemaining != 0 {
		t.Errorf("warm-up of the sold-out voucher after redis came back empty: used %d of %d, redis remaining %v; want 0",
			view.UsedCount, view.TotalLimit, deref(view.RedisRemaining))
	}
	checkRedisEqualsDB(t, b, code)
	if late := sellRest(t, c, b.App.Pool, code, "late-"); len(late) != 0 {
		t.Errorf("sold out, yet %d late orders were granted", len(late))
	}

	// And the warm-up job loads it the same way.
	rs.RestartEmpty()
	loaded := 0
	testkit.Eventually(t, "the warm-up job ran once redis came back empty", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n, err := b.App.Jobs.Warmup(ctx)
		loaded = n
		return err == nil // an error until the pool redials
	})
	if loaded != 1 {
		t.Errorf("warm-up job after redis came back empty loaded %d vouchers; want 1", loaded)
	}
	checkRedisEqualsDB(t, b, code)
	b.CheckInvariants(t, code, nil)
}

// Redis is killed mid-sale and comes back with everything it acknowledged (append-only file,
// fsync always). It is not reloaded: every order granted before the kill is still held by the
// attempt that took it. The sale goes on to the same end: no 201 lost, nothing sold twice,
// Redis equal to the database after reconciliation, the rest sold exactly.
func TestRedisRestartedWithItsDataMidSale(t *testing.T) {
	rs := testkit.StartRedis(t, testkit.RedisPersistent())
	b, clock, c := startBackend(t, func(cfg *config.Backend) { cfg.RedisURL = rs.URL() })
	const code, total = "REDIS-KEPT", 150
	createFlash(t, b, code, total, 2)

	attempts := storm("", 600, 2)
	s := startSale(attempts, 48, func(a attempt) outcome { return c.reserveOrder(code, a, patient) })
	s.waitGranted(t, total/3)
	s.running(t, "kill redis")
	met := c.unavailable.Load()
	killedAt := time.Now()
	rs.Kill()
	c.waitUnavailable(t, met, 20, "clients meet the dead Redis: 503, and retry")
	rs.Start()

	watch := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer watch.Close()
	g := backendtest.ReadGate(t, watch, b.Config.RedisPrefix, code)
	before := s.grantedBefore(killedAt)
	if !g.Loaded {
		t.Errorf("redis came back without the voucher; it was persistent")
	}
	for _, order := range before {
		if h, ok := g.Orders[order]; !ok || attemptOf(h) == "db" {
			t.Errorf("order %s, granted before the kill, is held as %q after redis came back: not its own data", order, h)
		}
	}
	t.Logf("%d orders granted before the kill, all held after the restart", len(before))

	outcomes := settle(t, c, code, s.wait(t))
	t.Logf("%s", tally(outcomes))
	granted := checkAnswers(t, b.App.Pool, code, outcomes)
	checkNoOverAllocation(t, b.App.Pool, code)
	// Nothing was lost, so nothing is missing: every active row is in Redis before any repair.
	b.CheckRedis(t, code)
	if rep := finish(t, b, clock, c, code, granted, customers(outcomes)); rep.Loaded || len(rep.PutBack) > 0 {
		t.Errorf("reconciliation had to load the voucher (%v) or put back orders %v; redis kept its data", rep.Loaded, rep.PutBack)
	}
}

// firstLoad watches Redis at addr until the voucher is loaded again and returns the uses left
// it first shows; reservations only lower that number, so it bounds what was loaded.
func firstLoad(t *testing.T, addr, prefix, code string) int64 {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	key := keys.ForVoucher(prefix, code).Remaining
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		n, err := rdb.Get(ctx, key).Int64()
		cancel()
		if err == nil {
			return n
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("redis did not get %s back within 30s of its restart", code)
	return 0
}

func deref(n *int64) any {
	if n == nil {
		return "absent"
	}
	return *n
}

// loseNewest makes Redis forget the voucher's n newest reservations in one atomic step, as a
// failover to a replica that had not received them would: each order leaves the gate with its
// use. It returns the orders lost, with their customers.
var loseNewest = redis.NewScript(`
local all = redis.call('HGETALL', KEYS[3])
local list = {}
for i = 1, #all, 2 do
  list[#list + 1] = {all[i], tonumber(string.match(all[i + 1], '^(%d+):')), string.match(all[i + 1], '^%d+:[^:]*:(.*)$')}
end
table.sort(list, function(a, b) return a[2] > b[2] end)
local lost = {}
for i = 1, math.min(tonumber(ARGV[1]), #list) do
  local order, customer = list[i][1], list[i][3]
  redis.call('HDEL', KEYS[3], order)
  if redis.call('HINCRBY', KEYS[2], customer, -1) <= 0 then
    redis.call('HDEL', KEYS[2], customer)
  end
  redis.call('INCR', KEYS[1])
  lost[#lost + 1] = order
  lost[#lost + 1] = customer
end
return lost
`)

// Redis fails over mid-sale to a replica that lacks the newest reservations (simulated: the
// newest orders leave the gate with their uses, in one atomic step). Redis now admits more
// winners than the database has room for: the database refuses the extra ones and their uses
// go back, so nothing is over-allocated. A lost order that was granted gets its 201 again when
// retried, even once the voucher has sold out, and is held in Redis again: its write met the
// order's row, so the use it took is kept (compensate only what the database did not take).
// Then Redis equals the database and the voucher sells exactly its remaining uses.
func TestRedisLosesRecentWritesMidSale(t *testing.T) {
	b, clock, c := startBackend(t, nil)
	const code, total = "REDIS-LOST", 150
	createFlash(t, b, code, total, 2)

	s := startSale(storm("", 600, 8), 48, func(a attempt) outcome { return c.reserveOrder(code, a, patient) })
	s.waitGranted(t, total/3)
	s.running(t, "lose the newest writes")
	raw, err := loseNewest.Run(context.Background(), b.App.Redis, keys.ForVoucher(b.Config.RedisPrefix, code).List(), 20).StringSlice()
	if err != nil || len(raw) != 40 {
		t.Fatalf("lose the newest reservations: %v %v", raw, err)
	}
	lost := map[string]string{}
	for i := 0; i < len(raw); i += 2 {
		lost[raw[i]] = raw[i+1]
	}

	outcomes := settle(t, c, code, s.wait(t))
	t.Logf("%s", tally(outcomes))
	granted := checkAnswers(t, b.App.Pool, code, outcomes)
	checkNoOverAllocation(t, b.App.Pool, code)

	// Sold out now. Every lost order that holds a use is still granted to its client.
	db := rows(t, b.App.Pool, code)
	retried := 0
	for order, customer := range lost {
		if r, ok := db[order]; !ok || !r.active() {
			continue
		}
		retried++
		if o := c.reserveOrder(code, attempt{customer: customer, order: order}, patient); o.status != 201 {
			t.Errorf("granted order %s, lost by redis, retried after the sell-out: %d %s", order, o.status, o.code)
		}
	}
	t.Logf("lost orders holding a use, retried after the sell-out: %d of %d", retried, len(lost))
	// Each retry's write met the order's row: the use it took in Redis is kept, not given back,
	// so Redis holds every active row again before any repair (R2).
	b.CheckRedis(t, code)
	if rep := finish(t, b, clock, c, code, granted, customers(outcomes)); len(rep.PutBack) > 0 {
		t.Errorf("reconciliation put back %v; the retries had restored them", rep.PutBack)
	}
}

// reconcileEvery runs the backend's reconciliation job every interval until stop is closed, as
// the periodic job does in production (its errors, with Redis down, are expected). The
// returned channel is closed once it has stopped.
func reconcileEvery(b *backendtest.Backend, interval time.Duration, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(interval):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, _ = b.App.Jobs.Reconcile(ctx, "")
			cancel()
		}
	}()
	return done
}
