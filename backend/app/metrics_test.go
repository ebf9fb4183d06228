package app_test

import (
	"testing"
	"time"

	"vouchergate/backend/app"
	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// The backend's /metrics is Prometheus text that the linter accepts, with the quota service's
// and the jobs' metrics in one registry, and they move with what the backend does: quota
// deducts and a rollback, a hold expired, a voucher reconciled.
func TestMetricsEndpoint(t *testing.T) {
	clock := &testkit.OffsetClock{}
	b := backendtest.Start(t, backendtest.Config(t), app.WithClock(clock))
	url := b.OpsURL + "/metrics"
	if st, body := b.Do(t, "POST", "/admin/quota-rules",
		`{"bizId":1,"identityType":"USER","dimension":"*","limit":1,"window":{"type":"DAY","timezone":"UTC"}}`); st != 201 {
		t.Fatalf("create a quota rule: %d %s", st, body)
	}
	testkit.Eventually(t, "the rule loaded", func() bool { return b.App.Quotas.Metrics().Rules == 1 })
	b.CreateVoucher(t, backendtest.Voucher{Code: "METRICS", Discount: 5, TotalLimit: 3, FlashSale: true})

	before := testkit.ScrapeMetrics(t, url)
	deduct := func(key string, want int) {
		t.Helper()
		body := `{"bizId":1,"idemKey":"` + key + `","items":[{"identityType":"USER","identity":"u","dimensions":["ITEM:1"]}]}`
		if st, answer := b.Do(t, "POST", "/quotas/deduct", body); st != want {
			t.Fatalf("deduct %s: %d %s; want %d", key, st, answer, want)
		}
	}
	deduct("first", 200)
	deduct("first", 200) // a retry: answered from the first's record
	deduct("second", 409)
	if st, body := b.Do(t, "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"first"}`); st != 200 {
		t.Fatalf("rollback: %d %s", st, body)
	}
	if st, body := b.Reserve(t, "METRICS", "cust", "order-1", 100); st != 201 {
		t.Fatalf("reserve: %d %s", st, body)
	}
	clock.Advance(16 * time.Minute) // past the hold time
	if st, body := b.Do(t, "POST", "/admin/expire", nil); st != 200 || string(body) != `{"released":1}` {
		t.Fatalf("expire: %d %s; want 1 released", st, body)
	}
	if st, body := b.Do(t, "POST", "/admin/reconcile?code=METRICS", nil); st != 200 {
		t.Fatalf("reconcile: %d %s", st, body)
	}
	after := testkit.ScrapeMetrics(t, url)

	for _, m := range []struct {
		name string
		by   float64
	}{
		{"vouchergate_quota_deducts_total", 3},
		{"vouchergate_quota_deducts_taken_total", 2},
		{"vouchergate_quota_steps_replayed_total", 1},
		{"vouchergate_quota_deducts_exceeded_total", 1},
		{"vouchergate_quota_deducts_rolled_back_total", 0},
		{"vouchergate_quota_deducts_key_reused_total", 0},
		{"vouchergate_quota_rollbacks_total", 1},
		{"vouchergate_quota_given_back_total", 1},
		{"vouchergate_quota_unavailable_total", 0},
		{"vouchergate_quota_undo_failed_total", 0},
		{"vouchergate_quota_rule_load_errors_total", 0},
		{"vouchergate_holds_expired_total", 1},
		{"vouchergate_reconcile_released_total", 0},
		{"vouchergate_reconcile_put_back_total", 0},
		{"vouchergate_warmups_total", 0},
	} {
		if got := after.Value(t, m.name) - before.Value(t, m.name); got != m.by {
			t.Errorf("%s moved by %v; want %v", m.name, got, m.by)
		}
	}
	if n := after.Value(t, "vouchergate_quota_rule_loads_total"); n < 1 {
		t.Errorf("vouchergate_quota_rule_loads_total is %v; want at least 1", n)
	}
	if n := after.Value(t, "vouchergate_quota_rules"); n != 1 {
		t.Errorf("vouchergate_quota_rules is %v; want 1", n)
	}
	// set when the voucher was created, before the first scrape, not only by reconciliation
	if n := after.Value(t, "vouchergate_voucher_total_limit", "code", "METRICS"); n != 3 {
		t.Errorf(`vouchergate_voucher_total_limit{code="METRICS"} is %v; want 3`, n)
	}
	if n := after.Value(t, "vouchergate_redis_drift", "code", "METRICS"); n != 0 {
		t.Errorf(`vouchergate_redis_drift{code="METRICS"} is %v; want 0`, n)
	}

	// Answers by route, status and code, timed by route; the flash path's write and calls.
	moved := func(name string, labels ...string) float64 {
		var was float64
		if before.Has(name, labels...) {
			was = before.Value(t, name, labels...)
		}
		return after.Value(t, name, labels...) - was
	}
	for _, m := range []struct {
		name   string
		labels []string
		by     float64
	}{
		{"vouchergate_http_requests_total", []string{"route", "reserve", "status", "201", "code", "OK"}, 1},
		{"vouchergate_http_requests_total", []string{"route", "quota_deduct", "status", "200", "code", "OK"}, 2},
		{"vouchergate_http_requests_total", []string{"route", "quota_deduct", "status", "409", "code", "QUOTA_EXCEEDED"}, 1},
		{"vouchergate_http_requests_total", []string{"route", "admin_expire", "status", "200", "code", "OK"}, 1},
		{"vouchergate_http_request_duration_seconds", []string{"route", "reserve"}, 1},
		{"vouchergate_http_request_duration_seconds", []string{"route", "quota_deduct"}, 3},
		{"vouchergate_flash_batch_rows", nil, 1},
		{"vouchergate_voucher_uses_left", []string{"code", "METRICS"}, 3},
	} {
		if got := moved(m.name, m.labels...); got != m.by {
			t.Errorf("%s%v moved by %v; want %v", m.name, m.labels, got, m.by)
		}
	}
	for _, m := range []struct {
		name   string
		labels []string
	}{
		{"vouchergate_redis_command_duration_seconds", []string{"command", "evalsha"}},
		{"vouchergate_postgres_query_duration_seconds", []string{"statement", "commit"}},
		{"vouchergate_dependency_up", []string{"dependency", "postgres"}},
		{"vouchergate_dependency_up", []string{"dependency", "redis"}},
		{"vouchergate_dependency_up", []string{"dependency", "nats"}},
		{"vouchergate_pg_pool_max_conns", nil},
		{"vouchergate_redis_pool_total_conns", nil},
		{"go_goroutines", nil},
		{"process_resident_memory_bytes", nil},
	} {
		if got := after.Value(t, m.name, m.labels...); got <= 0 {
			t.Errorf("%s%v is %v; want above 0", m.name, m.labels, got)
		}
	}
	if st, body := b.Do(t, "GET", "/readyz", nil); st != 200 ||
		string(body) != `{"status":"ready","checks":{"nats":"ok","postgres":"ok","redis":"ok","redis_eviction":"ok"}}` {
		t.Errorf("/readyz: %d %s; want 200 with every check ok", st, body)
	}
}
