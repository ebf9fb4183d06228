package app_test

import (
	"fmt"
	"io"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// Issue 12, item 5: a reservation body the edge's fast scanner cannot be certain of ("OrderId",
// a repeated key, an escape) is read by the edge with a full decode, as the backend's: a granted
// order's retry is still forwarded (201 again), a new order is answered 409 at the edge, even
// with the backend down. (Before: every such body was forwarded, 502 with the backend down.)
func TestOddBodiesOfASoldOutVoucherAreDecidedAtTheEdge(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.StartProcess(t, cfg)
	admin := backendtest.Start(t, cfg)
	e := startEdge(t, edgeConfig(cfg.NATSURL, cfg.NATSPrefix, b.Addr()))
	granted := sellOut(t, admin, e, "ODD", 2)
	testkit.Eventually(t, "sell-out learned", func() bool { return e.knows("ODD") })

	odd := []string{
		`{"customerId":"%[1]s","OrderId":"%[2]s","orderAmount":1000}`,
		`{"customerId":"%[1]s","orderId":"someone-else","orderId":"%[2]s","orderAmount":1000}`,
		`{"customerId":"%[1]s","order\u0049d":"%[2]s","orderAmount":1000}`,
		`{"customerId":"%[1]s","orderid":"%[2]s","orderAmount":1000}`,
		`{"customerId":"%[1]s","orderId":"%[2]s","orderAmount":1000,"ORDERID":"%[2]s"}`,
	}
	send := func(body string) (int, string) { return post(t, e.Addr, "/vouchers/ODD/reservations", body) }
	validate := func(body string) (int, string) { return post(t, e.Addr, "/vouchers/ODD/validate", body) }
	for i, f := range odd {
		j := i % len(granted) // sellOut's customer of granted[j] is cust-j
		body := fmt.Sprintf(f, fmt.Sprintf("cust-%d", j), granted[j])
		if status, answer := send(body); status != 201 {
			t.Errorf("granted order's retry %s: %d %s; want 201 again", body, status, answer)
		}
	}

	b.Kill()
	for i, f := range odd {
		body := fmt.Sprintf(f, fmt.Sprintf("late-cust-%d", i), fmt.Sprintf("late-%d", i))
		if status, answer := send(body); status != 409 || answer != `{"error":"OUT_OF_STOCK"}` {
			t.Errorf("new order %s with the backend down: %d %s; want the edge's 409", body, status, answer)
		}
		if status, answer := validate(body); status != 200 || answer != `{"valid":false,"error":"OUT_OF_STOCK"}` {
			t.Errorf("new order's dry run %s with the backend down: %d %s; want the edge's sold-out answer", body, status, answer)
		}
	}
	// What the backend would refuse stays the backend's to answer.
	if status, _ := send(`{"OrderId":`); status == 409 {
		t.Error("a malformed body got the edge's 409; it is the backend's to refuse")
	}
}

// post sends body to path on a connection of its own and reads the answer.
func post(t *testing.T, addr, path, body string) (int, string) {
	t.Helper()
	c := dialRaw(t, addr)
	raw := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: shop.example\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	return c.answer(t)
}
