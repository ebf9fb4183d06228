package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"vouchergate/backend/app"
	"vouchergate/backend/backendtest"
	"vouchergate/backend/backendtest/history"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// Holds expire while their customers confirm them. Two backends share one database, Redis and
// clock; both run the expiry job over and over (one through POST /admin/expire) while the clock
// moves through every hold's expiry, customers confirm through either backend (a third of them
// through both at once), and new customers buy the uses expiry gives back. Each order ends
// CONFIRMED or RELEASED, never both: a confirm answered 200 is CONFIRMED, one answered 409
// RESERVATION_RELEASED is RELEASED. Each release is counted once (the jobs' counts add up to
// the released rows, used_count agrees: D1), and Redis gave back exactly the released orders:
// before any reconciliation it holds exactly the confirmed ones. What every client was told is
// checked against the voucher model, each hold coming due recorded before a job can see it due.
func TestHoldsExpireWhileConfirmsRace(t *testing.T) {
	clock := &testkit.OffsetClock{}
	cfg := backendtest.Config(t)
	cfg.HoldTTL = 10 * time.Minute
	a := backendtest.Start(t, cfg, app.WithClock(clock))
	b := backendtest.Start(t, cfg, app.WithClock(clock))
	clients := []*client{newClient(t, a.URL), newClient(t, b.URL)}
	const code, total = "EXPIRY", 200
	createFlash(t, a, code, total, 1)

	// Sell out in ten waves a minute apart, so the holds expire over ten minutes. A third of
	// the orders are sent to both backends at once: each answers 201.
	var first []string
	for w := range 10 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range total / 10 {
			at := attempt{customer: fmt.Sprintf("c%d-%d", w, i), order: fmt.Sprintf("o%d-%d", w, i)}
			sends := []*client{clients[i%2]}
			if i%3 == 0 {
				sends = clients
			}
			for j, c := range sends {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if o := c.reserveOrder(code, at, patient); o.status != 201 || o.discount != discount {
						t.Errorf("wave %d: order %s: %d %s", w, at.order, o.status, o.code)
						return
					}
					if j == 0 {
						mu.Lock()
						first = append(first, at.order)
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		clock.Advance(time.Minute)
	}
	if len(first) != total {
		t.Fatalf("%d of %d reservations before the race", len(first), total)
	}
	if n := len(active(rows(t, a.App.Pool, code))); n != total {
		t.Fatalf("%d active rows after the waves; want %d", n, total)
	}

	// The race: both backends expire, the clock moves 12 minutes, customers confirm, newcomers buy.
	stop := make(chan struct{})
	var expired atomic.Int64
	var jobs sync.WaitGroup
	expire := []func() (int, error){
		func() (int, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return a.App.Jobs.Expire(ctx)
		},
		func() (int, error) { return adminExpire(clients[1]) },
	}
	due := &dueHolds{code: code, recorded: map[string]bool{}}
	for k, run := range expire {
		expire[k] = func() (int, error) {
			due.record(t, a.App.Pool, clock.Now().Add(time.Minute))
			return run()
		}
	}
	var passes [2]atomic.Int64 // whole runs of each expiry job
	for k, run := range expire {
		jobs.Add(1)
		go func() {
			defer jobs.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				n, err := run()
				if err != nil {
					t.Errorf("expire: %v", err)
				}
				expired.Add(int64(n))
				passes[k].Add(1)
				time.Sleep(3 * time.Millisecond)
			}
		}()
	}
	// The clock moves 30 s at a time, 24 times, and customers confirm in 25 groups, group g
	// once the clock has made g steps. Order i of wave w (its hold expiring at step 2w) goes
	// in a group a step before its expiry, at it, or a step after: the step after a group's
	// confirms are all answered and a whole run of each job has followed the last step, so the
	// first kind is certainly accepted, the last certainly refused, and the middle races the
	// jobs, however fast or slow the machine.
	const groups = 25
	groupOf := func(i int) int {
		return min(groups-1, max(0, i*20/len(first)+(i/3)%3-1))
	}
	var want, answered [groups]atomic.Int64 // confirms of each group, asked and answered
	var progress atomic.Int64               // the customers' confirms answered
	customerConfirms := int64(0)
	for i := range first {
		n := int64(1)
		if i%3 == 0 {
			n = 2 // through both backends
		}
		want[groupOf(i)].Add(n)
		customerConfirms += n
	}
	waitProgress := func(n int64) {
		for progress.Load() < n {
			time.Sleep(time.Millisecond)
		}
	}
	var steps atomic.Int64
	var moving sync.WaitGroup // the clock's steps, each waiting for a whole run of both jobs
	moving.Add(1)
	go func() {
		defer moving.Done()
		for step := int64(1); step <= groups-1; step++ {
			for g := range step {
				for answered[g].Load() < want[g].Load() {
					time.Sleep(time.Millisecond)
				}
			}
			clock.Advance(30 * time.Second)
			before := [2]int64{passes[0].Load(), passes[1].Load()}
			for k := range passes {
				for passes[k].Load() < before[k]+2 {
					time.Sleep(time.Millisecond)
				}
			}
			steps.Add(1)
		}
	}()

	type confirmation struct {
		order string
		answer
	}
	var mu sync.Mutex
	var confirms []confirmation
	var newcomers []outcome
	var buyers sync.WaitGroup
	confirm := func(c *client, order string) {
		got := c.confirm(code, order)
		mu.Lock()
		confirms = append(confirms, confirmation{order, got})
		mu.Unlock()
	}
	confirmAnswered := func(i int) {
		answered[groupOf(i)].Add(1)
		progress.Add(1)
	}
	for i, order := range first {
		buyers.Add(1)
		go func() {
			defer buyers.Done()
			for steps.Load() < int64(groupOf(i)) {
				time.Sleep(time.Millisecond)
			}
			if i%3 != 0 {
				confirm(clients[i%2], order)
				confirmAnswered(i)
				return
			}
			var both sync.WaitGroup
			for _, c := range clients {
				both.Add(1)
				go func() {
					defer both.Done()
					confirm(c, order)
					confirmAnswered(i)
				}()
			}
			both.Wait()
		}()
	}
	for i := range 80 {
		at := attempt{customer: fmt.Sprintf("new%d", i), order: fmt.Sprintf("new-o%d", i)}
		buyers.Add(1)
		go func() {
			defer buyers.Done()
			waitProgress(int64(i) * customerConfirms / 80) // spread through the race
			c := clients[i%2]
			o := c.reserveOrder(code, at, patient)
			mu.Lock()
			newcomers = append(newcomers, o)
			mu.Unlock()
			if o.status == 201 && i%4 != 0 { // a quarter never pay: their holds expire
				confirm(clients[(i+1)%2], at.order)
			}
		}()
	}
	buyers.Wait()
	// The last buyers may be answered before the clock has made its last steps (past every
	// hold's expiry), and each step waits for the jobs: they stop once it has made them.
	moving.Wait()
	close(stop)
	jobs.Wait()
	if n := steps.Load(); n != 24 {
		t.Fatalf("the clock moved %d of its 24 steps during the race", n)
	}

	// Every hold still unconfirmed expires now, released by both backends at once.
	clock.Advance(cfg.HoldTTL + time.Minute)
	var last sync.WaitGroup
	for _, run := range expire {
		last.Add(1)
		go func() {
			defer last.Done()
			n, err := run()
			if err != nil {
				t.Errorf("expire: %v", err)
			}
			expired.Add(int64(n))
		}()
	}
	last.Wait()

	db := rows(t, a.App.Pool, code)
	var confirmed, released []string
	for id, r := range db {
		switch r.status {
		case wire.StatusConfirmed:
			confirmed = append(confirmed, id)
		case wire.StatusReleased:
			released = append(released, id)
		default:
			t.Errorf("order %s ends %s; every hold has expired or been confirmed", id, r.status)
		}
	}
	accepted, refused := map[string]bool{}, map[string]bool{}
	for _, c := range confirms {
		r := db[c.order]
		switch {
		case c.status == 200 && r.status == wire.StatusConfirmed:
		case c.status == 409 && c.code == wire.CodeReservationReleased && r.status == wire.StatusReleased:
		default:
			t.Errorf("order %s: confirm answered %d %s, the row is %s", c.order, c.status, c.code, r.status)
		}
		if c.status == 200 {
			accepted[c.order] = true
		} else {
			refused[c.order] = true
		}
	}
	for order := range accepted {
		if refused[order] {
			t.Errorf("order %s: one confirm answered 200, another did not", order)
		}
	}
	for _, o := range newcomers {
		switch r, ok := db[o.order]; {
		case o.status == 201 && !ok:
			t.Errorf("D4 newcomer %s answered 201 without a row", o.order)
		case o.status == 409 && ok:
			t.Errorf("newcomer %s refused, yet it has a row (%s)", o.order, r.status)
		case o.status != 201 && o.status != 409:
			t.Errorf("newcomer %s: %d %s", o.order, o.status, o.code)
		}
	}
	t.Logf("confirmed %d, released %d (jobs counted %d), newcomers %s", len(confirmed), len(released), expired.Load(), tally(newcomers))
	if int(expired.Load()) != len(released) {
		t.Errorf("the expiry jobs counted %d releases; %d rows are released: a hold was counted twice or missed", expired.Load(), len(released))
	}
	t.Logf("confirms answered 200 for %d orders, 409 RESERVATION_RELEASED for %d", len(accepted), len(refused))
	if len(accepted) == 0 || len(refused) == 0 {
		t.Errorf("confirms accepted for %d orders, refused for %d: the confirms did not race the expiry", len(accepted), len(refused))
	}
	// Redis gave back exactly the released orders, without any repair.
	a.CheckInvariants(t, code, confirmed)
	checkRedisEqualsDB(t, a, code)
	rep := reconcile(t, clients[0], code)
	if len(rep.Released) > 0 || len(rep.PutBack) > 0 || rep.Recounted {
		t.Errorf("reconciliation after expiry had to repair redis: %+v", rep)
	}
	more := sellRest(t, clients[1], a.App.Pool, code, "rest-")
	b.CheckInvariants(t, code, append(confirmed, more...))
	checkRedisEqualsDB(t, b, code)
}

// dueHolds records in a test's history each hold of a voucher as it comes due.
type dueHolds struct {
	code     string
	mu       sync.Mutex
	recorded map[string]bool // orders whose hold came due
}

// record records every hold due by the clock time by that is not recorded yet, as an expiry
// that may release it from now on. An expiry job started after it, reading the clock within a
// minute, releases none other.
func (d *dueHolds) record(t *testing.T, pool *pgxpool.Pool, by time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rows, err := pool.Query(context.Background(), `SELECT order_id FROM redemptions
		WHERE voucher_code = $1 AND hold_expires_at <= $2`, d.code, by)
	if err != nil {
		t.Errorf("read the holds due: %v", err)
		return
	}
	orders, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Errorf("read the holds due: %v", err)
		return
	}
	for _, o := range orders {
		if !d.recorded[o] {
			d.recorded[o] = true
			history.For(t).Begin(history.Op{Kind: history.Expire, Voucher: d.code, Order: o}).Info("hold due")
		}
	}
}

// adminExpire runs POST /admin/expire and returns how many holds it released.
func adminExpire(c *client) (int, error) {
	a, raw := c.send("POST", "/admin/expire", nil, 30*time.Second)
	var body struct {
		Released int `json:"released"`
	}
	if a.status != 200 || json.Unmarshal(raw, &body) != nil {
		return 0, fmt.Errorf("POST /admin/expire: %d %s", a.status, raw)
	}
	return body.Released, nil
}
