package app_test

import (
	"fmt"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// Dry runs through a real edge and backend: before the sell-out they reach the backend and
// answer valid; once the edge knows the voucher is sold out it answers a new order's dry run
// itself, as the backend would, while a granted order's dry run still reaches the backend and
// is valid. A quota check passes through too.
func TestValidateThroughTheEdge(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.Start(t, cfg)
	front := startFront(t, b.Addr)
	e := startEdge(t, edgeConfig(cfg.NATSURL, cfg.NATSPrefix, front.Addr))
	validate := func(customer, order string) answer {
		return e.do(t, "POST", "/vouchers/DRY/validate",
			fmt.Sprintf(`{"customerId":%q,"orderId":%q,"orderAmount":100000}`, customer, order))
	}
	b.CreateVoucher(t, backendtest.Voucher{Code: "DRY", Discount: 5000, TotalLimit: 3, FlashSale: true})
	if a := validate("cust-0", "DRY-order-0"); a.Status != 200 || a.Body != `{"valid":true,"discountAmount":5000}` {
		t.Fatalf("dry run before the sale: %d %s", a.Status, a.Body)
	}
	var granted []string
	for i := range 3 {
		order := fmt.Sprintf("DRY-order-%d", i)
		if a := e.reserve(t, "DRY", fmt.Sprintf("cust-%d", i), order); a.Status != 201 {
			t.Fatalf("reserve %s: %d %s", order, a.Status, a.Body)
		}
		granted = append(granted, order)
	}
	testkit.Eventually(t, "the edge knows the sell-out", func() bool { return e.knows("DRY") })

	before := front.others.Load()
	for i := range 100 {
		a := validate("late", fmt.Sprintf("late-%d", i))
		if a.Status != 200 || a.Body != `{"valid":false,"error":"OUT_OF_STOCK"}` {
			t.Fatalf("dry run of a new order after the sell-out: %d %s", a.Status, a.Body)
		}
	}
	// The holders are a Bloom filter: a rare new order is taken for one and forwarded.
	if n := front.others.Load() - before; n > 5 {
		t.Fatalf("%d of 100 dry runs of a sold-out voucher reached the backend; want almost none", n)
	}
	before = front.others.Load()
	if a := validate("cust-1", granted[1]); a.Status != 200 || a.Body != `{"valid":true,"discountAmount":5000}` {
		t.Fatalf("dry run of a granted order: %d %s", a.Status, a.Body)
	}
	if front.others.Load() == before {
		t.Fatal("a granted order's dry run was answered by the edge; want the backend's answer")
	}
	b.CheckInvariants(t, "DRY", granted)

	if a := e.do(t, "POST", "/quotas/check", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"1","dimensions":["ITEM:1"]}]}`); a.Status != 200 || a.Body != `{"pass":true,"idemKey":"k","counters":[],"warning":"NO_QUOTA_RULES"}` {
		t.Fatalf("quota check through the edge: %d %s", a.Status, a.Body)
	}
}
