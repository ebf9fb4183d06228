package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// An id the API takes is what the client sent: bytes that are not UTF-8 (which encoding/json
// would turn into U+FFFD, so "M-\xff" and "M-\xfe" became one order), lone surrogate escapes
// (the same), control characters C0, DEL and C1, and the dot segments "." and ".." (which no
// path can name, so such an order could never be confirmed) are refused with a 400 naming the
// field and the rule, in bodies and paths alike, and nothing is written.
func TestIDsAreRefusedUnlessTheyAreWhatTheySeem(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	b.CreateVoucher(t, backendtest.Voucher{Code: "IDS", Discount: 10, TotalLimit: 10, FlashSale: true})
	b.CreateVoucher(t, backendtest.Voucher{Code: "IDN", Discount: 10, TotalLimit: 10})
	before := readRedis(t, b, "IDS")

	bad := []struct {
		name, raw, rule string // raw: the id as it stands in the JSON body, quotes included
	}{
		{"byte 0xff", "\"M-\xff\"", "UTF-8"},
		{"byte 0xfe", "\"M-\xfe\"", "UTF-8"},
		{"a lone surrogate escape", `"M-\udcff"`, "UTF-8"},
		{"a lone high surrogate escape", `"M-\ud800x"`, "UTF-8"},
		{"U+FFFD itself", `"M-\ufffd"`, "UTF-8"},
		{"C1 NEL escaped", `"M-\u0085"`, "control"},
		{"C1 as UTF-8", "\"M-\u009f\"", "control"},
		{"DEL", `"M-\u007f"`, "control"},
		{"a dot", `"."`, `"."`},
		{"two dots", `".."`, `".."`},
	}
	for _, code := range []string{"IDS", "IDN"} {
		for _, c := range bad {
			for _, field := range []string{"orderId", "customerId"} {
				order, customer := `"ok-order"`, `"ok-customer"`
				if field == "orderId" {
					order = c.raw
				} else {
					customer = c.raw
				}
				body := `{"customerId":` + customer + `,"orderId":` + order + `,"orderAmount":100}`
				status, got := b.Do(t, "POST", "/vouchers/"+code+"/reservations", body)
				var e wire.Error
				_ = json.Unmarshal(got, &e)
				if status != 400 || e.Error != wire.CodeBadRequest || !strings.Contains(e.Message, field) || !strings.Contains(e.Message, c.rule) {
					t.Errorf("%s: %s %s: %d %s; want 400 BAD_REQUEST naming %s and %q", code, field, c.name, status, got, field, c.rule)
				}
			}
		}
	}
	var rows int
	if err := b.App.Pool.QueryRow(context.Background(), `SELECT count(*) FROM redemptions`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("refused ids wrote %d redemptions (%v)", rows, err)
	}
	sameRedis(t, before, readRedis(t, b, "IDS"))

	// The path is held to the same rule: fasthttp decodes %XX before the backend reads it.
	testkit.RequirePathIDsRefused(t, b.Addr, "IDS")
	// A dot segment never reaches the handler as an orderId (fasthttp resolves it); whatever it
	// becomes, it is not a reservation.
	for _, seg := range []string{".", "..", "%2E", "%2E%2E"} {
		status, got := testkit.RawHTTP(t, b.Addr, "POST /vouchers/IDS/reservations/"+seg+"/confirm HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
		if status < 400 || status >= 500 {
			t.Errorf("confirm %s: %d %s; want a 4xx", seg, status, got)
		}
	}

	// Ids that are text are taken, from the body and from the path, and name one order.
	for _, id := range []string{"M-é", "M-日本", "M-.", "...", "M-\u00a0"} {
		body, _ := json.Marshal(map[string]any{"customerId": "c-" + id, "orderId": id, "orderAmount": 100})
		if status, got := b.Do(t, "POST", "/vouchers/IDS/reservations", body); status != 201 {
			t.Errorf("reserve %q: %d %s; want 201", id, status, got)
			continue
		}
		if status, got := b.Do(t, "POST", "/vouchers/IDS/reservations/"+pathEscape(id)+"/confirm", nil); status != 200 {
			t.Errorf("confirm %q: %d %s; want 200", id, status, got)
		}
	}
}

// pathEscape percent-encodes every byte of a path segment but unreserved ASCII.
func pathEscape(s string) string {
	const hex = "0123456789ABCDEF"
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '~' {
			out.WriteByte(c)
			continue
		}
		out.WriteByte('%')
		out.WriteByte(hex[c>>4])
		out.WriteByte(hex[c&15])
	}
	return out.String()
}

// Quota ids (idemKey, identity, a dimension's value) are held to the same text rule: a lone
// surrogate escape, U+FFFD or a C1 control character is refused by name, as bytes that are not
// UTF-8 always were.
func TestQuotaIDsAreText(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	for _, c := range []struct{ name, body, field, rule string }{
		{"idemKey lone surrogate", `{"bizId":1,"idemKey":"k-\udcff","items":[{"identityType":"USER","identity":"u","dimensions":["ITEM:1"]}]}`, "idemKey", "UTF-8"},
		{"idemKey C1", `{"bizId":1,"idemKey":"k-\u0085","items":[{"identityType":"USER","identity":"u","dimensions":["ITEM:1"]}]}`, "idemKey", "control"},
		{"identity lone surrogate", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"u-\ud800","dimensions":["ITEM:1"]}]}`, "identity", "UTF-8"},
		{"identity C1", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"u-\u009f","dimensions":["ITEM:1"]}]}`, "identity", "control"},
		{"dimension U+FFFD", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"u","dimensions":["ITEM:\ufffd"]}]}`, "dimensions", "UTF-8"},
	} {
		status, got := b.Do(t, "POST", "/quotas/deduct", c.body)
		var e wire.Error
		_ = json.Unmarshal(got, &e)
		if status != 400 || !strings.Contains(e.Message, c.field) || !strings.Contains(e.Message, c.rule) {
			t.Errorf("deduct, %s: %d %s; want 400 naming %s and %q", c.name, status, got, c.field, c.rule)
		}
	}
	status, got := b.Do(t, "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k-\udcff"}`)
	if status != 400 || !strings.Contains(string(got), "idemKey") {
		t.Errorf("rollback with a lone surrogate idemKey: %d %s; want 400 naming idemKey", status, got)
	}
	for _, identity := range []string{"u-%C2%85", "u-%EF%BF%BD", "u-%FF"} {
		status, got := b.Do(t, "GET", "/quotas/usage?bizId=1&identityType=USER&dimension=ITEM:1&identity="+identity, nil)
		if status != 400 || !strings.Contains(string(got), "identity") {
			t.Errorf("usage of identity %s: %d %s; want 400 naming identity", identity, status, got)
		}
	}
}
