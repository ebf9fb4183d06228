package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

// Bad input gets a 4xx JSON error that names the problem, and writes nothing.
func TestBadInput(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	b.CreateVoucher(t, backendtest.Voucher{Code: "BAD", Discount: 10, TotalLimit: 10, FlashSale: true})
	before := readRedis(t, b, "BAD")
	long := strings.Repeat("x", 65)
	cases := []struct {
		name, method, path, body string
		status                   int
		code, mentions           string
	}{
		{"not json", "POST", "/vouchers/BAD/reservations", `hello`, 400, wire.CodeBadRequest, "JSON"},
		{"empty body", "POST", "/vouchers/BAD/reservations", ``, 400, wire.CodeBadRequest, "empty"},
		{"array", "POST", "/vouchers/BAD/reservations", `[1,2]`, 400, wire.CodeBadRequest, "object"},
		{"truncated", "POST", "/vouchers/BAD/reservations", `{"customerId":"a"`, 400, wire.CodeBadRequest, "JSON"},
		{"trailing data", "POST", "/vouchers/BAD/reservations", `{"customerId":"a","orderId":"o","orderAmount":1} {}`, 400, wire.CodeBadRequest, "after"},
		{"trailing ]", "POST", "/vouchers/BAD/reservations", `{"customerId":"a","orderId":"o","orderAmount":1}]`, 400, wire.CodeBadRequest, "data after the JSON object"},
		{"trailing }", "POST", "/vouchers/BAD/reservations", `{"customerId":"a","orderId":"o","orderAmount":1}}`, 400, wire.CodeBadRequest, "data after the JSON object"},
		{"trailing word", "POST", "/vouchers/BAD/reservations", `{"customerId":"a","orderId":"o","orderAmount":1} x`, 400, wire.CodeBadRequest, "data after the JSON object"},
		{"trailing NUL", "POST", "/vouchers/BAD/reservations", "{\"customerId\":\"a\",\"orderId\":\"o\",\"orderAmount\":1}\x00", 400, wire.CodeBadRequest, "data after the JSON object"},
		// A number is a customerId: these reach the voucher lookup, which finds no NOPE.
		{"customerId a number", "POST", "/vouchers/NOPE/reservations", `{"customerId":7,"orderId":"o","orderAmount":1}`, 404, wire.CodeVoucherNotFound, "not found"},
		{"customerId the largest BIGINT", "POST", "/vouchers/NOPE/reservations", `{"customerId":9223372036854775807,"orderId":"o","orderAmount":1}`, 404, wire.CodeVoucherNotFound, "not found"},
		{"white space after the object", "POST", "/vouchers/NOPE/reservations", "{\"customerId\":0,\"orderId\":\"o\",\"orderAmount\":1} \r\n\t", 404, wire.CodeVoucherNotFound, "not found"},
		{"customerId a fraction", "POST", "/vouchers/BAD/reservations", `{"customerId":4.2,"orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId 4.2 is not a whole number; expected a JSON integer from 0 to 9223372036854775807, or a string"},
		{"customerId a whole fraction", "POST", "/vouchers/BAD/reservations", `{"customerId":42.0,"orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId 42.0 is not a whole number; expected a JSON integer from 0 to 9223372036854775807, or a string"},
		{"customerId with an exponent", "POST", "/vouchers/BAD/reservations", `{"customerId":1e3,"orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId 1e3 has an exponent; expected a JSON integer from 0 to 9223372036854775807, or a string"},
		{"customerId negative", "POST", "/vouchers/BAD/reservations", `{"customerId":-1,"orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId -1 has a minus sign; expected a JSON integer from 0 to 9223372036854775807, or a string"},
		{"customerId minus zero", "POST", "/vouchers/BAD/reservations", `{"customerId":-0,"orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId -0 has a minus sign; expected a JSON integer from 0 to 9223372036854775807, or a string"},
		{"customerId beyond BIGINT", "POST", "/vouchers/BAD/reservations", `{"customerId":9223372036854775808,"orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId 9223372036854775808 is beyond a signed 64-bit integer; expected a JSON integer from 0 to 9223372036854775807, or a string"},
		{"customerId beyond 64 bits", "POST", "/vouchers/BAD/reservations", `{"customerId":18446744073709551616,"orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId 18446744073709551616 is beyond a signed 64-bit integer; expected a JSON integer from 0 to 9223372036854775807, or a string"},
		{"customerId true", "POST", "/vouchers/BAD/reservations", `{"customerId":true,"orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId must not be true; expected a JSON integer from 0 to 9223372036854775807, or a string"},
		{"customerId an object", "POST", "/vouchers/BAD/reservations", `{"customerId":{"id":1},"orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId must not be an object; expected a JSON integer from 0 to 9223372036854775807, or a string"},
		{"customerId an array", "POST", "/vouchers/BAD/reservations", `{"customerId":[1],"orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId must not be an array; expected a JSON integer from 0 to 9223372036854775807, or a string"},
		{"customerId null", "POST", "/vouchers/BAD/reservations", `{"customerId":null,"orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId is required"},
		{"customerId empty", "POST", "/vouchers/BAD/reservations", `{"customerId":"","orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId is required"},
		// Not JSON at all, so refused as JSON before any field is read.
		{"customerId with a leading zero", "POST", "/vouchers/BAD/reservations", `{"customerId":042,"orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "not valid JSON"},
		{"customerId with a plus", "POST", "/vouchers/BAD/reservations", `{"customerId":+42,"orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "not valid JSON"},
		{"orderAmount a string", "POST", "/vouchers/BAD/reservations", `{"customerId":"a","orderId":"o","orderAmount":"1"}`, 400, wire.CodeBadRequest, "orderAmount"},
		{"orderAmount a fraction", "POST", "/vouchers/BAD/reservations", `{"customerId":"a","orderId":"o","orderAmount":1.5}`, 400, wire.CodeBadRequest, "orderAmount"},
		{"orderAmount too big", "POST", "/vouchers/BAD/reservations", `{"customerId":"a","orderId":"o","orderAmount":1e30}`, 400, wire.CodeBadRequest, "orderAmount"},
		{"orderAmount negative", "POST", "/vouchers/BAD/reservations", `{"customerId":"a","orderId":"o","orderAmount":-1}`, 400, wire.CodeBadRequest, "orderAmount"},
		{"orderAmount missing", "POST", "/vouchers/BAD/reservations", `{"customerId":"a","orderId":"o"}`, 400, wire.CodeBadRequest, "orderAmount"},
		{"orderId missing", "POST", "/vouchers/BAD/reservations", `{"customerId":"a","orderAmount":1}`, 400, wire.CodeBadRequest, "orderId"},
		{"customerId missing", "POST", "/vouchers/BAD/reservations", `{"orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId"},
		{"orderId too long", "POST", "/vouchers/BAD/reservations", `{"customerId":"a","orderId":"` + long + `","orderAmount":1}`, 400, wire.CodeBadRequest, "orderId"},
		{"customerId too long", "POST", "/vouchers/BAD/reservations", `{"customerId":"` + long + `","orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId"},
		{"orderId with a slash", "POST", "/vouchers/BAD/reservations", `{"customerId":"a","orderId":"a/b","orderAmount":1}`, 400, wire.CodeBadRequest, "orderId"},
		{"customerId with a control character", "POST", "/vouchers/BAD/reservations", `{"customerId":"a\u0000","orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "customerId"},
		{"huge body", "POST", "/vouchers/BAD/reservations", `{"customerId":"` + strings.Repeat("a", 10000) + `"}`, 413, wire.CodePayloadTooLarge, "limit"},
		{"a code with a non-ASCII letter", "POST", "/vouchers/FLA%C5%BFH/reservations", `{"customerId":"a","orderId":"o","orderAmount":1}`, 400, wire.CodeBadRequest, "code"},
		{"code too long", "POST", "/vouchers/" + strings.Repeat("A", 33) + "/reservations", `{}`, 400, wire.CodeBadRequest, "code"},
		{"unknown voucher", "POST", "/vouchers/NOPE/reservations", `{"customerId":"a","orderId":"o","orderAmount":1}`, 404, wire.CodeVoucherNotFound, "not found"},
		{"wrong method", "GET", "/vouchers/BAD/reservations", ``, 405, wire.CodeMethodNotAllowed, "POST"},
		{"unknown path", "GET", "/nowhere", ``, 404, wire.CodeNotFound, "/nowhere"},
		{"confirm an orderId too long", "POST", "/vouchers/BAD/reservations/" + long + "/confirm", ``, 400, wire.CodeBadRequest, "orderId"},
		{"create with a bad code", "POST", "/admin/vouchers", `{"code":"bad code","discountAmount":1,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`, 400, wire.CodeBadRequest, "code"},
		{"create ending before it starts", "POST", "/admin/vouchers", `{"code":"X","discountAmount":1,"totalLimit":1,"startsAt":"2027-01-01T00:00:00Z","endsAt":"2026-01-01T00:00:00Z"}`, 400, wire.CodeBadRequest, "endsAt"},
		{"create with a bad time", "POST", "/admin/vouchers", `{"code":"X","discountAmount":1,"totalLimit":1,"startsAt":"tomorrow","endsAt":"2026-01-01T00:00:00Z"}`, 400, wire.CodeBadRequest, "startsAt"},
		{"create with a negative discount", "POST", "/admin/vouchers", `{"code":"X","discountAmount":-1,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`, 400, wire.CodeBadRequest, "discountAmount"},
		{"create with perUserLimit 0", "POST", "/admin/vouchers", `{"code":"X","discountAmount":1,"totalLimit":1,"perUserLimit":0,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`, 400, wire.CodeBadRequest, "perUserLimit"},
		{"create without totalLimit", "POST", "/admin/vouchers", `{"code":"X","discountAmount":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`, 400, wire.CodeBadRequest, "totalLimit"},
		{"create with data after it", "POST", "/admin/vouchers", `{"code":"X","discountAmount":1,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}]`, 400, wire.CodeBadRequest, "data after the JSON object"},
		{"create an existing voucher", "POST", "/admin/vouchers", `{"code":"BAD","discountAmount":1,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`, 409, wire.CodeVoucherExists, "exists"},
	}
	for _, c := range cases {
		status, body := b.Do(t, c.method, c.path, c.body)
		var e wire.Error
		if err := json.Unmarshal(body, &e); err != nil {
			t.Errorf("%s: body %q is not a JSON error", c.name, body)
			continue
		}
		if status != c.status || e.Error != c.code || !strings.Contains(e.Message, c.mentions) {
			t.Errorf("%s: %d %s %q; want %d %s mentioning %q", c.name, status, e.Error, e.Message, c.status, c.code, c.mentions)
		}
	}

	var rows int
	if err := b.App.Pool.QueryRow(context.Background(), `SELECT count(*) FROM redemptions`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("bad input wrote %d redemptions (%v)", rows, err)
	}
	if st, _ := b.Do(t, "GET", "/admin/vouchers/X", nil); st != 404 {
		t.Errorf("a refused voucher was created: GET answered %d", st)
	}
	sameRedis(t, before, readRedis(t, b, "BAD"))
}

// The admin API needs the bearer token, and is off without one configured. A wrong token of the
// token's own length is refused like any other (the comparison is subtle.ConstantTimeCompare,
// whose time does not depend on where the bytes differ).
func TestAdminAuthorization(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	sameLength := strings.Repeat("x", len(backendtest.Token))
	lastByte := backendtest.Token[:len(backendtest.Token)-1] + "X"
	for _, c := range []struct {
		header string
		status int
	}{{"", 401}, {"Bearer wrong", 401}, {"Basic " + backendtest.Token, 401}, {"Bearer " + sameLength, 401},
		{"Bearer " + lastByte, 401}, {"Bearer " + backendtest.Token + "x", 401}, {"Bearer " + backendtest.Token, 404}} {
		status, body := b.DoWithHeader(t, "GET", "/admin/vouchers/NONE", "Authorization", c.header)
		if status != c.status {
			t.Errorf("Authorization %q: %d %s; want %d", c.header, status, body, c.status)
		}
	}
	cfg := backendtest.Config(t)
	cfg.AdminToken = ""
	off := backendtest.Start(t, cfg)
	if status, body := off.Do(t, "GET", "/admin/vouchers/NONE", nil); status != 403 || !strings.Contains(string(body), "VG_ADMIN_TOKEN") {
		t.Errorf("admin API without a token configured: %d %s; want 403 naming VG_ADMIN_TOKEN", status, body)
	}
}
