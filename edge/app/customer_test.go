package app_test

import (
	"fmt"
	"strings"
	"testing"
	"vouchergate/testkit"

	"vouchergate/backend/backendtest"
)

// reserveRaw sends a reservation through e whose customerId is the JSON text customer: a
// number, as the seed's clients send it, or a quoted string.
func (e *edge) reserveRaw(t *testing.T, code, customer, order string) answer {
	t.Helper()
	return e.do(t, "POST", "/vouchers/"+code+"/reservations",
		fmt.Sprintf(`{"customerId":%s,"orderId":%q,"orderAmount":100000}`, customer, order))
}

// A numeric customerId passes through the edge to the backend and gets its 201 on both paths;
// after a flash sell-out the edge still reads the orderId of such a body and lets a granted
// order's retry through, in either form of the customerId.
func TestNumericCustomerIDThroughTheEdge(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.Start(t, cfg)
	front := startFront(t, b.Addr)
	e := startEdge(t, edgeConfig(cfg.NATSURL, cfg.NATSPrefix, front.Addr))
	b.CreateVoucher(t, backendtest.Voucher{Code: "NORMAL", Discount: 300, TotalLimit: 10})
	b.CreateVoucher(t, backendtest.Voucher{Code: "FLASH", Discount: 500, TotalLimit: 2, FlashSale: true})

	if a := e.reserveRaw(t, "NORMAL", `42`, "normal-1"); a.Status != 201 || discountOf(t, a.Body) != 300 {
		t.Fatalf("normal voucher, customerId 42: %d %s; want 201", a.Status, a.Body)
	}
	if a := e.reserveRaw(t, "NORMAL", `"42"`, "normal-2"); a.Status != 409 || !strings.Contains(a.Body, "ALREADY_USED") {
		t.Fatalf("normal voucher, customerId \"42\" after 42 took its one use: %d %s; want 409 ALREADY_USED", a.Status, a.Body)
	}
	for _, c := range []struct{ customer, order string }{{`42`, "flash-1"}, {`43`, "flash-2"}} {
		if a := e.reserveRaw(t, "FLASH", c.customer, c.order); a.Status != 201 || discountOf(t, a.Body) != 500 {
			t.Fatalf("flash voucher, customerId %s: %d %s; want 201", c.customer, a.Status, a.Body)
		}
	}
	if a := e.reserveRaw(t, "FLASH", `44`, "flash-3"); a.Status != 409 {
		t.Fatalf("third reservation of two uses: %d %s; want 409", a.Status, a.Body)
	}
	testkit.Eventually(t, "the edge knows the sell-out", func() bool { return e.knows("FLASH") })

	before := front.reserves.Load()
	for _, c := range []struct{ customer, order string }{{`42`, "flash-1"}, {`"42"`, "flash-1"}, {`43`, "flash-2"}} {
		if a := e.reserveRaw(t, "FLASH", c.customer, c.order); a.Status != 201 || discountOf(t, a.Body) != 500 {
			t.Fatalf("retry of %s as customerId %s after the sell-out: %d %s; want 201", c.order, c.customer, a.Status, a.Body)
		}
	}
	if n := front.reserves.Load() - before; n != 3 {
		t.Fatalf("%d of 3 granted retries reached the backend", n)
	}
	if a := e.reserveRaw(t, "FLASH", `45`, "flash-4"); a.Status != 409 {
		t.Fatalf("new order after the sell-out: %d %s; want 409", a.Status, a.Body)
	}
	b.CheckInvariants(t, "FLASH", []string{"flash-1", "flash-2"})
	b.CheckInvariants(t, "NORMAL", []string{"normal-1"})
}
