package app_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"vouchergate/backend/backendtest"
)

// Issue 12, item 3: a header the edge accepts, the backend accepts as the edge forwards it.
// The edge takes up to VG_MAX_HEADER_BYTES from a client and the backend reads that setting
// too, with room for what the edge adds; a header that grows past that on the way gets the
// edge's 431, never the backend's 400. (Before: the backend kept fasthttp's 4 KB read buffer,
// so a shopper with a 4–6 KB cookie got 400 "malformed HTTP request" through the edge.)
func TestHeadersTheEdgeTakesTheBackendTakes(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.StartProcess(t, cfg) // the backend command, reading VG_MAX_HEADER_BYTES's default
	admin := backendtest.Start(t, cfg)
	admin.CreateVoucher(t, backendtest.Voucher{Code: "COOKIE", Discount: 100, TotalLimit: 1000})
	e := startEdge(t, edgeConfig(cfg.NATSURL, cfg.NATSPrefix, b.Addr()))

	reserve := func(order, extra string) string {
		body := fmt.Sprintf(`{"customerId":%q,"orderId":%q,"orderAmount":1000}`, "c-"+order, order)
		return "POST /vouchers/COOKIE/reservations HTTP/1.1\r\nHost: shop.example\r\nContent-Type: application/json\r\n" +
			extra + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
	}
	for _, size := range []int{3000, 4500, 6000, 7900} {
		c := dialRaw(t, e.Addr)
		order := fmt.Sprintf("cookie-%d", size)
		if _, err := io.WriteString(c, reserve(order, "Cookie: session="+strings.Repeat("s", size-len("session="))+"\r\n")); err != nil {
			t.Fatal(err)
		}
		if status, body := c.answer(t); status != 201 {
			t.Errorf("a %d-byte cookie through the edge: %d %s; want 201", size, status, body)
		}
	}

	// Many short lines the edge writes again longer ("a:b" as "A: b"): within the client's limit,
	// over the backend's once forwarded, so the edge answers 431 itself.
	var lines strings.Builder
	for lines.Len() < 7700 {
		lines.WriteString("a:v\r\n")
	}
	c := dialRaw(t, e.Addr)
	if _, err := io.WriteString(c, reserve("many-lines", lines.String())); err != nil {
		t.Fatal(err)
	}
	if status, body := c.answer(t); status != 431 {
		t.Errorf("a header of many short lines: %d %s; want the edge's 431", status, body)
	}

	// A body of exactly VG_MAX_BODY_BYTES (8 KB: JSON padded with spaces), sent with its length
	// or chunked, passes the edge and the backend takes it; a byte more is the edge's 413.
	padded := func(order string, size int) string {
		body := fmt.Sprintf(`{"customerId":%q,"orderId":%q,"orderAmount":1000}`, "c-"+order, order)
		return body + strings.Repeat(" ", size-len(body))
	}
	for _, tt := range []struct {
		name    string
		size    int
		chunked bool
		want    int
	}{
		{"at the limit", 8192, false, 201},
		{"at the limit, chunked", 8192, true, 201},
		{"a byte over", 8193, false, 413},
		{"a byte over, chunked", 8193, true, 413},
	} {
		order := "body-" + strings.ReplaceAll(tt.name, " ", "-")
		order = strings.ReplaceAll(order, ",", "")
		body := padded(order, tt.size)
		head := "POST /vouchers/COOKIE/reservations HTTP/1.1\r\nHost: shop.example\r\nContent-Type: application/json\r\n"
		raw := head + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
		if tt.chunked {
			raw = head + "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
		}
		c := dialRaw(t, e.Addr)
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		if status, answer := c.answer(t); status != tt.want {
			t.Errorf("a %d-byte body %s: %d %s; want %d", tt.size, tt.name, status, answer, tt.want)
		}
	}
}
