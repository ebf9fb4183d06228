package app_test

import (
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// The edge's /metrics is Prometheus text that the linter accepts, holds every metric the edge
// exports, and its counters move with what the edge does: a new order of a sold-out voucher is
// answered here, a granted order's retry goes to the backend.
func TestMetricsEndpoint(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.Start(t, cfg)
	e := startEdge(t, edgeConfig(cfg.NATSURL, cfg.NATSPrefix, b.Addr))
	granted := sellOut(t, b, e, "METRICS", 2)
	testkit.Eventually(t, "sell-out learned", func() bool { return e.knows("METRICS") })
	url := "http://" + e.Ops + "/metrics"

	before := testkit.ScrapeMetrics(t, url)
	if a := e.reserve(t, "METRICS", "late", "late-order"); a.Status != 409 {
		t.Fatalf("new order of a sold-out voucher: %d %s; want 409", a.Status, a.Body)
	}
	if a := e.reserve(t, "METRICS", "cust-0", granted[0]); a.Status != 201 {
		t.Fatalf("retry of a granted order: %d %s; want 201", a.Status, a.Body)
	}
	after := testkit.ScrapeMetrics(t, url)

	for _, m := range []struct {
		name   string
		labels []string
		by     float64
	}{
		{"vg_edge_soldout_answers_total", nil, 1},
		{"vg_edge_holder_forwards_total", nil, 1},
		{"vg_edge_requests_total", []string{"route", "reserve"}, 2},
		{"vg_edge_requests_total", []string{"route", "confirm"}, 0},
		{"vg_edge_unreadable_forwards_total", nil, 0},
		{"vg_edge_slow_reads_total", nil, 0},
		{"vg_edge_body_budget_full_total", nil, 0},
		{"vg_edge_learned_from_409_total", nil, 0},
		{"vg_edge_refreshes_asked_total", nil, 0},
		{"vg_edge_rejected_requests_total", nil, 0},
		{"vg_edge_upstream_errors_total", []string{"status", "502"}, 0},
		{"vg_edge_upstream_errors_total", []string{"status", "503"}, 0},
		{"vg_edge_upstream_errors_total", []string{"status", "504"}, 0},
		{"vg_edge_nats_stale_states_total", nil, 0},
		{"vg_edge_answers_total", []string{"route", "reserve", "status", "409", "code", "OUT_OF_STOCK"}, 1},
		{"vg_edge_answers_total", []string{"route", "reserve", "status", "201", "code", "OK"}, 1},
		{"vg_edge_request_duration_seconds", []string{"route", "reserve"}, 2},
	} {
		var was float64
		if before.Has(m.name, m.labels...) {
			was = before.Value(t, m.name, m.labels...)
		}
		if got := after.Value(t, m.name, m.labels...) - was; got != m.by {
			t.Errorf("%s%v moved by %v; want %v", m.name, m.labels, got, m.by)
		}
	}
	for _, m := range []struct {
		name string
		min  float64
	}{
		{"vg_edge_backends_healthy", 1},
		{"vg_edge_soldout_vouchers", 1},
		{"vg_edge_nats_connected", 1},
		{"vg_edge_nats_syncs_total", 1},
		{"vg_edge_nats_states_total", 1}, // the sell-out
		{"go_goroutines", 1},
		{"process_resident_memory_bytes", 1},
	} {
		if got := after.Value(t, m.name); got < m.min {
			t.Errorf("%s is %v; want at least %v", m.name, got, m.min)
		}
	}
}
