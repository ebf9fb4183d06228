package app_test

import (
	"strings"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// The edge holds an orderId in the path to the backend's rule (wire.CheckID) and answers a
// bad one 400 itself, naming orderId and the rule; a body's ids reach the backend, which
// refuses them the same way.
func TestEdgeHoldsIDsToTheBackendsRule(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.Start(t, cfg)
	front := startFront(t, b.Addr)
	e := startEdge(t, edgeConfig(cfg.NATSURL, cfg.NATSPrefix, front.Addr))
	b.CreateVoucher(t, backendtest.Voucher{Code: "IDS", Discount: 10, TotalLimit: 10, FlashSale: true})

	before := front.others.Load()
	testkit.RequirePathIDsRefused(t, e.Addr, "IDS")
	if n := front.others.Load() - before; n != 0 {
		t.Errorf("%d requests with a bad orderId in the path reached the backend; want the edge to answer them", n)
	}

	for _, c := range []struct{ name, body, field string }{
		{"orderId byte 0xff", "{\"customerId\":\"c\",\"orderId\":\"M-\xff\",\"orderAmount\":1}", "orderId"},
		{"orderId byte 0xfe", "{\"customerId\":\"c\",\"orderId\":\"M-\xfe\",\"orderAmount\":1}", "orderId"},
		{"orderId a dot", `{"customerId":"c","orderId":".","orderAmount":1}`, "orderId"},
		{"orderId C1", `{"customerId":"c","orderId":"M-\u0085","orderAmount":1}`, "orderId"},
		{"customerId lone surrogate", `{"customerId":"c-\udcff","orderId":"M-1","orderAmount":1}`, "customerId"},
	} {
		if a := e.do(t, "POST", "/vouchers/IDS/reservations", c.body); a.Status != 400 || !strings.Contains(a.Body, c.field) {
			t.Errorf("reserve through the edge, %s: %d %s; want 400 naming %s", c.name, a.Status, a.Body, c.field)
		}
	}
	b.CheckInvariants(t, "IDS", nil)
}
