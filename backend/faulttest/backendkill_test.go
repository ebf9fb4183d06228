package faulttest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/app"
	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// A backend process is SIGKILLed mid-sale while winners of the Redis gate wait for the database
// (a two-connection pool behind a slowed insert), and a new one takes over its address. Clients
// that retry converge on the new backend. The uses of orders whose clients left with the dead
// backend hang in Redis (under-allocation); the new backend's reconciler keeps them through
// the grace period and then releases exactly those. Then Redis equals the database, every 201
// is backed (D4), an abandoned client that comes back gets its order if its row committed
// after all, and the voucher sells exactly its remaining uses.
func TestBackendKilledMidSale(t *testing.T) {
	const code, total = "KILLED", 300
	const grace = 8 * time.Second // the new backend's, on the wall clock
	cfg := backendtest.Config(t)
	// In this process, on the same database and key prefix: it creates the voucher, reads both
	// stores, and reconciles at the same time as the backend under test, the separate process.
	// Its grace is an hour on a clock the test moves, so a reconciliation within the grace is
	// certainly within it, however slow the machine.
	cfg.ReconcileGrace = time.Hour
	clock := &testkit.OffsetClock{}
	checker := backendtest.Start(t, cfg, app.WithClock(clock))
	createFlash(t, checker, code, total, 2)
	for _, sql := range []string{
		`CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_sleep(0.005); RETURN NEW; END $$`,
		`CREATE TRIGGER slow_insert BEFORE INSERT ON redemptions FOR EACH ROW EXECUTE FUNCTION slow_insert()`,
	} {
		if _, err := checker.App.Pool.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	proc := backendtest.StartProcess(t, cfg, "VG_RECONCILE_GRACE="+grace.String(), "VG_DB_TIMEOUT=1s",
		"VG_INFLIGHT_WAIT=1s", "VG_DB_MAX_CONNS=2", "VG_REQUEST_TIMEOUT=10s")
	c := newClient(t, proc.URL())

	// Customers whose number ends in an odd digit close the page when their request gets no
	// answer; the others' clients send it again.
	abandons := func(customer string) bool { return strings.ContainsAny(customer[len(customer)-1:], "13579") }
	reserve := func(a attempt) outcome {
		p := patient
		p.retryLost = !abandons(a.customer)
		return c.reserveOrder(code, a, p)
	}
	s := startSale(storm("", 900, 7), 64, reserve)
	s.waitGranted(t, total/3)
	s.running(t, "kill the backend")
	// Hold the voucher's row so that winners certainly wait for the database when the backend
	// dies: a batch already sent waits for the lock inside PostgreSQL (and would still commit
	// once it is free: it was sent with its COMMIT), the later ones wait in the writer's queue.
	// Once an abandoning customer's winner waits, the backend is killed, and the connections it
	// left waiting on the lock are ended as PostgreSQL ends a dead client's.
	release := holdVoucherRow(t, checker, code)
	testkit.Eventually(t, "an abandoning customer's winner waiting for the database", func() bool {
		g := backendtest.ReadGate(t, checker.App.Redis, cfg.RedisPrefix, code)
		for _, id := range hanging(g, rows(t, checker.App.Pool, code)) {
			if abandons(holderCustomer(g.Orders[id])) {
				return true
			}
		}
		return false
	})
	proc.Kill()
	release()
	proc.Start()
	wave1 := s.wait(t)
	t.Logf("first wave: %s", tally(wave1))

	waitQuiet(t, checker.App.Pool, checker.App.Redis, cfg.RedisPrefix, code)
	answered := map[string]bool{}
	for _, o := range wave1 {
		if o.definitive() {
			answered[o.order] = true
		} else if !abandons(o.customer) {
			t.Errorf("order %s: a retrying client ended with %d %s", o.order, o.status, o.code)
		}
	}
	held := hanging(backendtest.ReadGate(t, checker.App.Redis, cfg.RedisPrefix, code), rows(t, checker.App.Pool, code))
	if len(held) == 0 {
		t.Fatalf("no use hangs in redis: the kill caught no winner between Redis and PostgreSQL")
	}
	for _, id := range held {
		if answered[id] {
			t.Errorf("order %s hangs in redis, yet a client of it was answered", id)
		}
	}
	t.Logf("%d uses hang in redis after the kill", len(held))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	reps, err := checker.App.Jobs.Reconcile(ctx, code)
	cancel()
	if err != nil || len(reps) != 1 {
		t.Fatalf("reconcile within the grace period: %v %v", reps, err)
	} else if len(reps[0].Released) > 0 {
		t.Errorf("reconciliation within the grace period released %s", brief(reps[0].Released))
	}
	// Past the grace period both backends reconcile at once: each hanging use is released
	// once, by one of them. The new backend's grace passes on the wall clock, which stamped
	// the holds; this one's clock is moved past its own.
	newest := newestHold(t, backendtest.ReadGate(t, checker.App.Redis, cfg.RedisPrefix, code), held)
	testkit.Eventually(t, "the hanging holds older than the new backend's grace", func() bool {
		return time.Since(newest) > grace+time.Second // a second for the holder's millisecond rounding and clock reads
	})
	clock.Advance(cfg.ReconcileGrace + time.Minute)
	var mine []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		reps, err := checker.App.Jobs.Reconcile(ctx, code)
		if err != nil || len(reps) != 1 {
			t.Errorf("reconcile in this process: %v %v", reps, err)
			return
		}
		mine = reps[0].Released
	}()
	rep := reconcile(t, c, code)
	<-done
	if both := append(append([]string(nil), rep.Released...), mine...); !sameSet(both, held) {
		t.Errorf("the two reconciliations released %s and %s; the hanging uses were %s", brief(rep.Released), brief(mine), brief(held))
	}
	granted := checkAnswers(t, checker.App.Pool, code, wave1)
	checker.CheckInvariants(t, code, granted)
	checkRedisEqualsDB(t, checker, code)

	// Second wave: the abandoned clients come back with their orders, and new customers buy
	// what is left.
	before := active(rows(t, checker.App.Pool, code))
	left := total - len(before)
	var wave2 []attempt
	seen := map[string]bool{}
	for _, o := range wave1 {
		if !answered[o.order] && !seen[o.order] {
			seen[o.order] = true
			wave2 = append(wave2, o.attempt)
		}
	}
	returning := len(wave2)
	for i := range left + 30 {
		wave2 = append(wave2, attempt{customer: "w2-c" + itoa(i), order: "w2-o" + itoa(i)})
	}
	outs := startSale(wave2, 32, func(a attempt) outcome { return c.reserveOrder(code, a, patient) }).wait(t)
	t.Logf("second wave (%d returning, %d new; %d uses left): %s", returning, len(wave2)-returning, left, tally(outs))
	sold, kept := 0, 0
	for _, o := range outs {
		_, had := before[o.order]
		switch {
		case had && o.status == 201:
			kept++
		case had:
			t.Errorf("order %s committed while its client was away; its retry got %d %s", o.order, o.status, o.code)
		case o.status == 201:
			sold++
		case o.status != 409:
			t.Errorf("second wave: order %s: %d %s", o.order, o.status, o.code)
		}
	}
	t.Logf("abandoned orders whose row had committed anyway: %d", kept)
	if sold != left {
		t.Errorf("the second wave was granted %d new uses; %d were left", sold, left)
	}
	all := append(wave1, outs...)
	granted = checkAnswers(t, checker.App.Pool, code, all)
	checker.CheckInvariants(t, code, granted)
	checkRedisEqualsDB(t, checker, code)
	retryGranted(t, c, code, granted, customers(all))
}

// newestHold returns when the newest of the orders ids was reserved, as its holder in g says.
func newestHold(t *testing.T, g backendtest.Gate, ids []string) time.Time {
	t.Helper()
	var newest time.Time
	for _, id := range ids {
		millis, _, _ := strings.Cut(g.Orders[id], ":")
		ms, err := strconv.ParseInt(millis, 10, 64)
		if err != nil {
			t.Fatalf("order %s: holder %q", id, g.Orders[id])
		}
		if at := time.UnixMilli(ms); at.After(newest) {
			newest = at
		}
	}
	return newest
}

// holdVoucherRow locks the voucher's row from the test until the returned func runs, which
// first ends every other connection of the database that waits for a lock (those the killed
// backend left), then lets the row go.
func holdVoucherRow(t *testing.T, b *backendtest.Backend, code string) func() {
	t.Helper()
	ctx := context.Background()
	tx, err := b.App.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM vouchers WHERE code = $1 FOR UPDATE`, code); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		const waiting = `FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`
		if _, err := b.App.Pool.Exec(ctx, `SELECT pg_terminate_backend(pid) `+waiting); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "the killed backend's waiting connections ended", func() bool {
			var n int
			return b.App.Pool.QueryRow(ctx, `SELECT count(*) `+waiting).Scan(&n) == nil && n == 0
		})
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// holderCustomer is the customer of a gate holder "reservedAtMillis:attempt:customerId".
func holderCustomer(holder string) string {
	parts := strings.SplitN(holder, ":", 3)
	return parts[len(parts)-1]
}
