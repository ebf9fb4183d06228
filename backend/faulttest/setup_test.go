package faulttest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"vouchergate/backend/app"
	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// reconcile runs POST /admin/reconcile?code= and returns the voucher's report. A 503 is sent
// again, as the answer asks: right after a Redis Cluster failover the backend's first call to
// the promoted shard can fail while its client learns the new layout (it never resends a call
// itself, since the scripts take uses).
func reconcile(t *testing.T, c *client, code string) wire.Reconciliation {
	t.Helper()
	a, raw := c.send("POST", "/admin/reconcile?code="+code, nil, time.Minute)
	for try := 1; a.status == 503 && try < 5; try++ {
		t.Logf("reconcile %s: 503 %s; sent again", code, raw)
		time.Sleep(200 * time.Millisecond)
		a, raw = c.send("POST", "/admin/reconcile?code="+code, nil, time.Minute)
	}
	var body struct {
		Vouchers []wire.Reconciliation `json:"vouchers"`
	}
	if a.status != 200 || json.Unmarshal(raw, &body) != nil || len(body.Vouchers) != 1 {
		t.Fatalf("reconcile %s: %d %s", code, a.status, raw)
	}
	t.Logf("reconcile %s: %+v", code, body.Vouchers[0])
	return body.Vouchers[0]
}

// sellRest sells the voucher to fresh customers until it answers OUT_OF_STOCK, and fails the
// test unless it sold exactly total_limit minus the active rows it had: no use lost, none sold
// twice. It returns the orders it was granted.
func sellRest(t *testing.T, c *client, pool *pgxpool.Pool, code, prefix string) []string {
	t.Helper()
	total := totalLimit(t, pool, code)
	left := total - len(active(rows(t, pool, code)))
	attempts := make([]attempt, left+30)
	for i := range attempts {
		attempts[i] = attempt{customer: fmt.Sprintf("%sc%d", prefix, i), order: fmt.Sprintf("%so%d", prefix, i)}
	}
	s := startSale(attempts, 16, func(a attempt) outcome { return c.reserveOrder(code, a, patient) })
	var granted []string
	for _, o := range s.wait(t) {
		switch {
		case o.status == 201:
			granted = append(granted, o.order)
		case o.status != 409 || o.code != wire.CodeOutOfStock:
			t.Errorf("selling the rest of %s: order %s answered %d %s", code, o.order, o.status, o.code)
		}
	}
	if len(granted) != left {
		t.Errorf("selling the rest of %s: %d granted; %d uses were left (total_limit %d)", code, len(granted), left, total)
	}
	if n := len(active(rows(t, pool, code))); n != total {
		t.Errorf("after selling the rest of %s: %d active rows; want total_limit %d", code, n, total)
	}
	return granted
}

// retryGranted sends every granted order once more: each must get the same 201.
func retryGranted(t *testing.T, c *client, code string, granted []string, customerOf map[string]string) {
	t.Helper()
	for _, order := range granted {
		o := c.reserveOrder(code, attempt{customer: customerOf[order], order: order}, patient)
		if o.status != 201 || o.discount != discount {
			t.Errorf("granted order %s retried after the sale: %d %s", order, o.status, o.code)
		}
	}
}

// startBackend runs an in-process backend on backendtest.Config changed by edit, telling time
// from a clock the test advances, and returns it with a client.
//
// It puts back the production bounds a retry lives with (backendtest's are generous): a hold
// whose outcome is unknown (its write cut, its Redis reply lost) is taken for stale after
// 2×DBTimeout, and a retry waits InFlightWait for its first attempt, so sales converge in
// seconds after a fault.
func startBackend(t *testing.T, edit func(*config.Backend)) (*backendtest.Backend, *testkit.OffsetClock, *client) {
	t.Helper()
	cfg := backendtest.Config(t)
	cfg.DBTimeout, cfg.InFlightWait = 2*time.Second, time.Second
	if edit != nil {
		edit(&cfg)
	}
	clock := &testkit.OffsetClock{}
	b := backendtest.Start(t, cfg, app.WithClock(clock))
	return b, clock, newClient(t, b.URL)
}

// createFlash creates an open flash voucher with the test discount.
func createFlash(t *testing.T, b *backendtest.Backend, code string, total, perUser int) {
	t.Helper()
	b.CreateVoucher(t, backendtest.Voucher{Code: code, Discount: discount, TotalLimit: total,
		PerUserLimit: perUser, FlashSale: true})
	recordVoucher(t, code, total, perUser)
}

// finish ends a sale on an in-process backend: it reconciles once the grace period has passed
// (advancing the clock), checks D1–D4 and R1–R2 and that Redis equals the database, sells the
// rest of the voucher (exactly its remaining uses), checks again, and retries every granted
// order. It returns the reconciliation's report.
func finish(t *testing.T, b *backendtest.Backend, clock *testkit.OffsetClock, c *client, code string, granted []string, customerOf map[string]string) wire.Reconciliation {
	t.Helper()
	clock.Advance(b.Config.ReconcileGrace + time.Minute)
	rep := reconcile(t, c, code)
	b.CheckInvariants(t, code, granted)
	checkRedisEqualsDB(t, b, code)

	more := sellRest(t, c, b.App.Pool, code, "rest-")
	for _, o := range more {
		customerOf[o] = strings.Replace(o, "rest-o", "rest-c", 1)
	}
	granted = append(granted, more...)
	b.CheckInvariants(t, code, granted)
	checkRedisEqualsDB(t, b, code)
	retryGranted(t, c, code, granted, customerOf)
	return rep
}
