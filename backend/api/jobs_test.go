package api_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"vouchergate/backend/app"
	"vouchergate/backend/backendtest"
	"vouchergate/backend/backendtest/history"
	"vouchergate/backend/voucher"
	"vouchergate/shared/keys"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

func startWithClock(t *testing.T) (*backendtest.Backend, *testkit.OffsetClock) {
	clock := &testkit.OffsetClock{}
	return backendtest.Start(t, backendtest.Config(t), app.WithClock(clock)), clock
}

func usedCount(t *testing.T, b *backendtest.Backend, code string) int {
	t.Helper()
	var n int
	if err := b.App.Pool.QueryRow(context.Background(), `SELECT used_count FROM vouchers WHERE code = $1`, code).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Holds not confirmed in time are released in PostgreSQL and Redis; confirmed ones stay.
func TestExpiryReleasesUnconfirmedHolds(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b, clock := startWithClock(t)
		b.CreateVoucher(t, backendtest.Voucher{Code: "HOLD", Discount: 5, TotalLimit: 3, FlashSale: flash,
			StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(48 * time.Hour)})
		for _, o := range []string{"a", "b", "c"} {
			if a := reserve(t, b, "HOLD", "cust-"+o, o, 10); a.status != 201 {
				t.Fatalf("reserve %s: %+v", o, a)
			}
		}
		if st, _ := b.Do(t, "POST", "/vouchers/HOLD/reservations/b/confirm", nil); st != 200 {
			t.Fatalf("confirm b: %d", st)
		}
		if st, body := b.Do(t, "POST", "/admin/expire", nil); st != 200 || string(body) != `{"released":0}` {
			t.Errorf("expire before the hold time: %d %s", st, body)
		}
		clock.Advance(16 * time.Minute)
		if st, body := b.Do(t, "POST", "/admin/expire", nil); st != 200 || string(body) != `{"released":2}` {
			t.Errorf("expire after the hold time: %d %s; want 2 released", st, body)
		}
		if st, body := b.Do(t, "POST", "/admin/expire", nil); st != 200 || string(body) != `{"released":0}` {
			t.Errorf("expire again: %d %s; want none", st, body)
		}
		if n := usedCount(t, b, "HOLD"); n != 1 {
			t.Errorf("used_count %d after expiry; want 1 (the confirmed one)", n)
		}
		if st, _ := b.Do(t, "POST", "/vouchers/HOLD/reservations/a/confirm", nil); st != 409 {
			t.Errorf("confirm an expired hold: %d; want 409", st)
		}
		for _, o := range []string{"d", "e"} {
			if a := reserve(t, b, "HOLD", "cust-"+o, o, 10); a.status != 201 {
				t.Errorf("reserve after expiry %s: %+v", o, a)
			}
		}
		b.CheckInvariants(t, "HOLD", []string{"b", "d", "e"})
	})
}

// Several backends expiring at once while clients confirm: each hold ends CONFIRMED or
// RELEASED, never both, and is counted once. What the clients were told is checked against the
// voucher model, every hold due (it may be released) from before the jobs run.
func TestExpiryOnSeveralBackendsRacingConfirms(t *testing.T) {
	clock := &testkit.OffsetClock{}
	cfg := backendtest.Config(t)
	b1 := backendtest.Start(t, cfg, app.WithClock(clock))
	b2 := backendtest.Start(t, cfg, app.WithClock(clock))
	v := backendtest.Voucher{Code: "RACE", Discount: 5, TotalLimit: 200, FlashSale: true,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(48 * time.Hour)}
	b1.CreateVoucher(t, v)
	recordSale(t, v, b1, b2)
	var orders []string
	for i := range 120 {
		o := "r" + itoa(i)
		if a := reserve(t, b1, "RACE", "c"+itoa(i), o, 10); a.status != 201 {
			t.Fatalf("reserve %s: %+v", o, a)
		}
		orders = append(orders, o)
	}
	for _, o := range orders {
		history.For(t).Begin(history.Op{Kind: history.Expire, Voucher: "RACE", Order: o}).Info("hold due")
	}
	clock.Advance(16 * time.Minute)

	var wg sync.WaitGroup
	var mu sync.Mutex
	released, confirmed := 0, map[string]bool{}
	for _, b := range []*backendtest.Backend{b1, b2, b1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := b.App.Jobs.Expire(context.Background())
			if err != nil {
				t.Errorf("expire: %v", err)
			}
			mu.Lock()
			released += n
			mu.Unlock()
		}()
	}
	for i, o := range orders {
		if i%2 == 1 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := []*backendtest.Backend{b1, b2}[i%4/2]
			st, _ := b.Do(t, "POST", "/vouchers/RACE/reservations/"+o+"/confirm", nil)
			switch st {
			case 200:
				mu.Lock()
				confirmed[o] = true
				mu.Unlock()
			case 409:
			default:
				t.Errorf("confirm %s: %d", o, st)
			}
		}()
	}
	wg.Wait()

	var nConfirmed, nReleased, nReserved int
	if err := b1.App.Pool.QueryRow(context.Background(), `SELECT
		count(*) FILTER (WHERE status = 'CONFIRMED'), count(*) FILTER (WHERE status = 'RELEASED'),
		count(*) FILTER (WHERE status = 'RESERVED') FROM redemptions`).Scan(&nConfirmed, &nReleased, &nReserved); err != nil {
		t.Fatal(err)
	}
	if nConfirmed != len(confirmed) || nReleased != released || nConfirmed+nReleased != len(orders) || nReserved != 0 {
		t.Errorf("confirmed %d (answered 200: %d), released %d (expiry said %d), reserved %d; want every one of %d settled once",
			nConfirmed, len(confirmed), nReleased, released, nReserved, len(orders))
	}
	var granted []string
	for o := range confirmed {
		granted = append(granted, o)
	}
	b1.CheckInvariants(t, "RACE", granted)
}

// Reconciliation releases an order held in Redis with no row once the grace period has
// passed, puts back a row Redis lost, and restores R1 after tampering.
func TestReconcileRepairsRedis(t *testing.T) {
	b, clock := startWithClock(t)
	b.CreateVoucher(t, backendtest.Voucher{Code: "REC", Discount: 5, TotalLimit: 10, FlashSale: true,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(48 * time.Hour)})
	for _, o := range []string{"ok1", "ok2"} {
		if a := reserve(t, b, "REC", "c-"+o, o, 10); a.status != 201 {
			t.Fatalf("reserve %s: %+v", o, a)
		}
	}
	ctx := context.Background()
	v := voucher.Voucher{Code: "REC", TotalLimit: 10, PerUserLimit: 1, Revision: 1}
	// a backend that died between Redis and PostgreSQL
	if res, err := b.App.Gate.Reserve(ctx, v, "hanging", voucher.Holder{CustomerID: "ghost", ReservedAt: clock.Now(), Attempt: "x1"}); err != nil || res.Outcome != voucher.GateReserved {
		t.Fatalf("take a hanging use: %+v %v", res, err)
	}
	reconcile := func() wire.Reconciliation {
		t.Helper()
		st, body := b.Do(t, "POST", "/admin/reconcile?code=REC", nil)
		var out struct{ Vouchers []wire.Reconciliation }
		if err := json.Unmarshal(body, &out); st != 200 || err != nil || len(out.Vouchers) != 1 {
			t.Fatalf("reconcile: %d %s", st, body)
		}
		return out.Vouchers[0]
	}
	if rep := reconcile(); rep.InFlight != 1 || len(rep.Released) != 0 {
		t.Errorf("within the grace period: %+v; want the hanging order left in flight", rep)
	}
	clock.Advance(31 * time.Second)
	if rep := reconcile(); len(rep.Released) != 1 || rep.Released[0] != "hanging" || rep.Drift != -1 {
		t.Errorf("after the grace period: %+v; want hanging released, drift -1", rep)
	}
	b.CheckInvariants(t, "REC", []string{"ok1", "ok2"})

	// Redis lost a row (it was written behind its back)
	exec(t, b, `UPDATE vouchers SET used_count = used_count + 1 WHERE code = 'REC'`)
	exec(t, b, `INSERT INTO redemptions (voucher_code, per_user_limit, customer_id, order_id, slot, status,
		order_amount, discount_amount, reserved_at, hold_expires_at)
		VALUES ('REC', 1, 'lost', 'lost-1', 1, 'RESERVED', 10, 5, now(), now() + interval '1 hour')`)
	if rep := reconcile(); len(rep.PutBack) != 1 || rep.PutBack[0] != "lost-1" || rep.RemainingAfter != 7 {
		t.Errorf("lost row: %+v; want lost-1 put back and 7 left", rep)
	}
	b.CheckInvariants(t, "REC", []string{"ok1", "ok2", "lost-1"})

	// someone set remaining by hand
	k := keys.ForVoucher(b.Config.RedisPrefix, "REC")
	b.App.Redis.Set(ctx, k.Remaining, 999, 0)
	b.App.Redis.HSet(ctx, k.Users, "nobody", 3)
	if rep := reconcile(); !rep.Recounted || rep.RemainingAfter != 7 {
		t.Errorf("tampered: %+v; want recounted to 7", rep)
	}
	b.CheckInvariants(t, "REC", []string{"ok1", "ok2", "lost-1"})
	if a := reserve(t, b, "REC", "after", "after-1", 10); a.status != 201 {
		t.Errorf("reserve after reconciliation: %+v", a)
	}
}

// Warm-up loads flash vouchers opening soon, from the database, and leaves later ones.
func TestWarmupLoadsVouchersOpeningSoon(t *testing.T) {
	b, _ := startWithClock(t)
	now := time.Now()
	b.CreateVoucher(t, backendtest.Voucher{Code: "SOON", Discount: 5, TotalLimit: 50, FlashSale: true,
		StartsAt: now.Add(5 * time.Minute), EndsAt: now.Add(time.Hour)})
	b.CreateVoucher(t, backendtest.Voucher{Code: "LATER", Discount: 5, TotalLimit: 50, FlashSale: true,
		StartsAt: now.Add(2 * time.Hour), EndsAt: now.Add(3 * time.Hour)})
	ctx := context.Background()
	for _, code := range []string{"SOON", "LATER"} { // as after a Redis restart
		k := keys.ForVoucher(b.Config.RedisPrefix, code)
		b.App.Redis.Del(ctx, k.Remaining, k.Users, k.Orders)
	}
	n, err := b.App.Jobs.Warmup(ctx)
	if err != nil || n != 1 {
		t.Fatalf("warm-up loaded %d (%v); want 1", n, err)
	}
	if got, _ := b.App.Redis.Get(ctx, keys.ForVoucher(b.Config.RedisPrefix, "SOON").Remaining).Int(); got != 50 {
		t.Errorf("SOON remaining %d; want 50", got)
	}
	if exists, _ := b.App.Redis.Exists(ctx, keys.ForVoucher(b.Config.RedisPrefix, "LATER").Remaining).Result(); exists != 0 {
		t.Errorf("LATER loaded two hours ahead")
	}
	if n, err := b.App.Jobs.Warmup(ctx); err != nil || n != 0 {
		t.Errorf("second warm-up loaded %d (%v); want 0", n, err)
	}
	if st, body := b.Do(t, "POST", "/admin/vouchers/LATER/warmup", nil); st != 200 || !json.Valid(body) {
		t.Errorf("warm-up endpoint: %d %s", st, body)
	}
	b.CheckRedis(t, "LATER")
}
