package app_test

import (
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// A backend on a Redis of its own, which has none of the scripts loaded: its first calls of
// each script meet NOSCRIPT and load it. That is no failure, so
// vouchergate_redis_command_errors_total stays empty through a flash sale's first reservations.
func TestNOSCRIPTIsNotACommandError(t *testing.T) {
	srv := testkit.StartRedis(t)
	cfg := backendtest.Config(t)
	cfg.RedisURL = srv.URL()
	b := backendtest.Start(t, cfg)
	b.CreateVoucher(t, backendtest.Voucher{Code: "NOSCRIPT", Discount: 5, TotalLimit: 3, FlashSale: true})
	if err := b.App.Redis.ScriptFlush(t.Context()).Err(); err != nil { // as after a Redis restart
		t.Fatal(err)
	}
	for _, order := range []string{"o-1", "o-2"} {
		if st, body := b.Do(t, "POST", "/vouchers/NOSCRIPT/reservations",
			`{"customerId":"c-`+order+`","orderId":"`+order+`","orderAmount":100}`); st != 201 {
			t.Fatalf("reserve %s: %d %s", order, st, body)
		}
	}
	m := testkit.ScrapeMetrics(t, b.OpsURL+"/metrics")
	for _, s := range m["vouchergate_redis_command_errors_total"].GetMetric() {
		t.Errorf("redis command errors counted: %v %v", s.GetLabel(), s.GetCounter().GetValue())
	}
}
