package app_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// shopperDo sends one request to the edge at addr with the bearer token tok ("" for none).
func shopperDo(t *testing.T, addr, method, path, body, tok string) (int, string) {
	t.Helper()
	st, b, _ := shopperAnswer(t, addr, method, path, body, tok)
	return st, b
}

// shopperAnswer is shopperDo with the answer's header fields, one "Name: value" a line in
// the order sent, but Date, which only tells when.
func shopperAnswer(t *testing.T, addr, method, path, body, tok string) (int, string, string) {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("http://" + addr + path)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.SetBodyString(body)
		req.Header.SetContentType("application/json")
	}
	if err := fasthttp.DoTimeout(req, resp, 10*time.Second); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	var header strings.Builder
	for name, value := range resp.Header.All() {
		if string(name) != "Date" {
			header.WriteString(string(name) + ": " + string(value) + "\n")
		}
	}
	return resp.StatusCode(), string(resp.Body()), header.String()
}

// Through the real edge and backend, with tokens signed by a test JWKS whose claims carry a
// shopper's device and phone: shopper 78 can neither spend, read nor block what is shopper 77's,
// on any route the edge serves (a partial rollback included), for USER, DEVICE and PHONE
// identities; what 78 is told about 77's orderIds and idemKeys is exactly what it is told about
// ones nobody used, also on a voucher the edge holds sold out or paused; and a service key still
// reaches everything its scopes allow, 77's orders and deducts included (naming 77).
func TestOneShopperCannotSpendReadOrBlockAnothers(t *testing.T) {
	bcfg := backendtest.Config(t)
	bcfg.APIKeysFile = filepath.Join(t.TempDir(), "keys.yaml")
	const edgeKey, checkoutKey, quotaKey = "edge-key-0123456789abcdef0123456789abcdef",
		"checkout-key-0123456789abcdef0123456789ab", "quota-key-0123456789abcdef0123456789abcd"
	backendtest.WriteKeys(t, bcfg.APIKeysFile,
		backendtest.APIKey{Name: "edge", Secret: edgeKey, Scopes: []string{"reserve", "quota", "read", "edge"}},
		backendtest.APIKey{Name: "checkout", Secret: checkoutKey, Scopes: []string{"reserve"}},
		backendtest.APIKey{Name: "quotas", Secret: quotaKey, Scopes: []string{"quota"}})
	b := backendtest.Start(t, bcfg)
	b.CreateVoucher(t, backendtest.Voucher{Code: "SHOP", Discount: 100, TotalLimit: 10})
	b.CreateVoucher(t, backendtest.Voucher{Code: "SHOPFLASH", Discount: 100, TotalLimit: 10, FlashSale: true})
	for _, typ := range []string{"USER", "DEVICE", "PHONE"} {
		if st, body := b.Do(t, "POST", "/admin/quota-rules", `{"bizId":7,"identityType":"`+typ+
			`","dimension":"*","limit":3,"window":{"type":"DAY","timezone":"UTC"}}`); st != 201 {
			t.Fatalf("rule for %s: %d %s", typ, st, body)
		}
	}
	testkit.Eventually(t, "the rules loaded", func() bool { return b.App.Quotas.Metrics().Rules == 3 })

	iss := testkit.NewTokenIssuer(t)
	cfg := edgeConfig(bcfg.NATSURL, bcfg.NATSPrefix, b.Addr)
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	writeFile(t, jwks, iss.JWKS(true))
	cfg.JWTJWKSFile, cfg.JWTAlgs, cfg.JWTAudience, cfg.JWTIssuer, cfg.JWTLeeway = jwks, []string{"RS256"}, iss.Audience, iss.Issuer, 30*time.Second
	cfg.JWTIdentityClaims = "DEVICE:device_id,PHONE:phone_number"
	cfg.APIKey = edgeKey
	e := startEdge(t, cfg)

	shopper := func(sub, device, phone string) string {
		c := iss.Claims(sub)
		c["device_id"], c["phone_number"] = device, phone
		return iss.Sign(t, "RS256", c)
	}
	s77, s78 := shopper("77", "d-victim", "+33677777777"), shopper("78", "d-78", "+33678787878")
	call := func(method, path, body, tok string) (int, string) {
		t.Helper()
		return shopperDo(t, e.Addr, method, path, body, tok)
	}
	deduct := func(idemKey string, amount int, items ...string) string {
		var parts []string
		for i := 0; i+1 < len(items); i += 2 {
			parts = append(parts, `{"identityType":"`+items[i]+`","identity":"`+items[i+1]+`","dimensions":["ITEM:1"],"amount":`+strconv.Itoa(amount)+`}`)
		}
		return `{"bizId":7,"idemKey":"` + idemKey + `","items":[` + strings.Join(parts, ",") + `]}`
	}
	usagePath := func(typ, identity string) string {
		return "/quotas/usage?bizId=7&identityType=" + typ + "&identity=" + strings.ReplaceAll(identity, "+", "%2B") + "&dimension=ITEM:1"
	}
	used := func(typ, identity string) string { // as a quota service reads it
		t.Helper()
		st, body, _ := b.DoWithHeaders(t, "GET", usagePath(typ, identity), nil, map[string]string{"X-API-Key": quotaKey})
		if st != 200 {
			t.Fatalf("usage of %s %s: %d %s", typ, identity, st, body)
		}
		i := strings.Index(string(body), `"used":`)
		if i < 0 {
			return "0"
		}
		return strings.SplitN(string(body)[i+len(`"used":`):], ",", 2)[0]
	}
	// sameAs checks that 78's answer to what is 77's is the answer to what nobody used, with
	// the id substituted.
	sameAs := func(what string, st int, body string, nst int, nbody, id, nid string) {
		t.Helper()
		if st != nst || body != strings.ReplaceAll(nbody, nid, id) {
			t.Errorf("%s: %d %s; with an id nobody used: %d %s; want the same answer", what, st, body, nst, nbody)
		}
	}

	// 77's own: a deduct on every identity, and reservations on both paths.
	if st, body := call("POST", "/quotas/deduct", deduct("order-77", 1, "USER", "77", "DEVICE", "d-victim", "PHONE", "+33677777777"), s77); st != 200 {
		t.Fatalf("77's deduct: %d %s", st, body)
	}
	for _, code := range []string{"SHOP", "SHOPFLASH"} {
		if st, body := call("POST", "/vouchers/"+code+"/reservations", `{"customerId":77,"orderId":"o-`+code+`","orderAmount":1000}`, s77); st != 201 {
			t.Fatalf("77's reservation of %s: %d %s", code, st, body)
		}
	}

	// Row 1: 78 spends, rolls back and reads 77's identities.
	for _, id := range [][2]string{{"USER", "77"}, {"DEVICE", "d-victim"}, {"PHONE", "+33677777777"}} {
		for _, path := range []string{"/quotas/deduct", "/quotas/check"} {
			if st, body := call("POST", path, deduct("k-78", 3, id[0], id[1]), s78); st != 403 {
				t.Errorf("78 %s on 77's %s: %d %s; want 403", path, id[0], st, body)
			}
		}
		if st, body := call("GET", usagePath(id[0], id[1]), "", s78); st != 403 {
			t.Errorf("78 reading 77's %s: %d %s; want 403", id[0], st, body)
		}
	}
	st, body := call("POST", "/quotas/rollback", `{"bizId":7,"idemKey":"order-77"}`, s78)
	nst, nbody := call("POST", "/quotas/rollback", `{"bizId":7,"idemKey":"never-used"}`, s78)
	sameAs("78 rolling back 77's idemKey", st, body, nst, nbody, "order-77", "never-used")
	for _, id := range [][2]string{{"USER", "77"}, {"DEVICE", "d-victim"}, {"PHONE", "+33677777777"}} {
		if got := used(id[0], id[1]); got != "1" {
			t.Errorf("77's %s after 78's tries: used %s; want 1", id[0], got)
		}
	}

	// Row 2: 78 deducts first under the idemKey 77 then uses; neither meets the other.
	if st, body := call("POST", "/quotas/deduct", deduct("order-5000", 1, "USER", "78", "DEVICE", "d-78", "PHONE", "+33678787878"), s78); st != 200 {
		t.Fatalf("78's deduct under order-5000: %d %s", st, body)
	}
	mine77 := []string{"USER", "77", "DEVICE", "d-victim", "PHONE", "+33677777777"}
	st, body = call("POST", "/quotas/check", deduct("order-5000", 1, mine77...), s77)
	nst, nbody = call("POST", "/quotas/check", deduct("fresh-77", 1, mine77...), s77)
	sameAs("77's check under the idemKey 78 used", st, body, nst, nbody, "order-5000", "fresh-77")
	if st, body := call("POST", "/quotas/deduct", deduct("order-5000", 1, mine77...), s77); st != 200 ||
		!strings.Contains(body, `"identity":"77"`) || strings.Contains(body, `"identity":"78"`) {
		t.Fatalf("77's deduct under the idemKey 78 used: %d %s; want 200 with 77's own counters", st, body)
	}
	if st, body := call("POST", "/quotas/rollback", `{"bizId":7,"idemKey":"order-5000"}`, s77); st != 200 ||
		!strings.Contains(body, `"identity":"d-victim"`) || !strings.Contains(body, `"identity":"+33677777777"`) ||
		strings.Contains(body, `"identity":"d-78"`) || strings.Contains(body, `"identity":"+33678787878"`) {
		t.Errorf("77's rollback of order-5000: %d %s; want 77's counters given back, none of 78's", st, body)
	}
	for _, c := range []struct{ typ, identity, want string }{
		{"USER", "77", "1"}, {"DEVICE", "d-victim", "1"}, {"PHONE", "+33677777777", "1"},
		{"USER", "78", "1"}, {"DEVICE", "d-78", "1"}, {"PHONE", "+33678787878", "1"},
	} {
		if got := used(c.typ, c.identity); got != c.want {
			t.Errorf("%s %s after both used order-5000: used %s; want %s", c.typ, c.identity, got, c.want)
		}
	}

	// A partial rollback (a refund of one of two units) through the edge, on DEVICE and PHONE:
	// 77 gives back its own; 78 can neither name 77's identities (403) nor reach 77's idemKey
	// with its own (as an idemKey nobody used).
	partial := func(idemKey string, items ...string) string {
		b := deduct(idemKey, 1, items...)
		return strings.Replace(b, `"items"`, `"rollbackKey":"refund-1","items"`, 1)
	}
	if st, body := call("POST", "/quotas/deduct", deduct("order-part", 2, "DEVICE", "d-victim", "PHONE", "+33677777777"), s77); st != 200 {
		t.Fatalf("77's deduct of two: %d %s", st, body)
	}
	for _, id := range [][2]string{{"DEVICE", "d-victim"}, {"PHONE", "+33677777777"}} {
		if st, body := call("POST", "/quotas/rollback", partial("order-part", id[0], id[1]), s78); st != 403 {
			t.Errorf("78's partial rollback naming 77's %s: %d %s; want 403", id[0], st, body)
		}
	}
	st, body = call("POST", "/quotas/rollback", partial("order-part", "DEVICE", "d-78", "PHONE", "+33678787878"), s78)
	nst, nbody = call("POST", "/quotas/rollback", partial("never-used", "DEVICE", "d-78", "PHONE", "+33678787878"), s78)
	sameAs("78's partial rollback of 77's idemKey", st, body, nst, nbody, "order-part", "never-used")
	if st, body := call("POST", "/quotas/rollback", partial("order-part", "DEVICE", "d-victim", "PHONE", "+33677777777"), s77); st != 200 ||
		strings.Count(body, `"amount":1`) != 2 {
		t.Errorf("77's partial rollback of one device and one phone unit: %d %s; want 1 given back on each", st, body)
	}
	for _, id := range [][2]string{{"DEVICE", "d-victim"}, {"PHONE", "+33677777777"}} {
		if got := used(id[0], id[1]); got != "2" {
			t.Errorf("77's %s after its partial rollback: used %s; want 1 + 2 - 1", id[0], got)
		}
	}
	if st, body := call("POST", "/quotas/rollback", `{"bizId":7,"idemKey":"order-part"}`, s77); st != 200 || strings.Count(body, `"amount":1`) != 2 {
		t.Errorf("77 rolling back the rest of order-part: %d %s; want 1 more given back on each", st, body)
	}

	// Row 3: 78 on 77's orderIds, on both paths: validate, confirm, release and a reservation of
	// the same string are each answered as for an orderId nobody used.
	for _, code := range []string{"SHOP", "SHOPFLASH"} {
		base := "/vouchers/" + code
		order := func(id string) string { return `{"customerId":78,"orderId":"` + id + `","orderAmount":1000}` }
		o77 := "o-" + code
		st, body := call("POST", base+"/validate", order(o77), s78)
		nst, nbody := call("POST", base+"/validate", order("o-none"), s78)
		sameAs(code+": 78's dry run of 77's orderId", st, body, nst, nbody, o77, "o-none")
		for _, r := range [][2]string{{"POST", "/confirm"}, {"DELETE", ""}} {
			st, body := call(r[0], base+"/reservations/"+o77+r[1], "", s78)
			nst, nbody := call(r[0], base+"/reservations/o-none"+r[1], "", s78)
			sameAs(code+": 78 "+r[0]+" 77's order", st, body, nst, nbody, o77, "o-none")
		}
		if st, body := call("POST", base+"/reservations", order(o77), s78); st != 201 || body != `{"orderId":"`+o77+`","discountAmount":100}` {
			t.Errorf("%s: 78 reserving the orderId 77 used: %d %s; want 201 (78's own order)", code, st, body)
		}
	}

	// A service reaches everything its scopes allow: the checkout confirms 77's order by its
	// orderId (naming the customer, since 78 holds one of the same string), releases 78's; the
	// quota service reads and rolls back 77's counters.
	checkout := map[string]string{"X-API-Key": checkoutKey}
	for _, code := range []string{"SHOP", "SHOPFLASH"} {
		base := "/vouchers/" + code + "/reservations/o-" + code
		if st, body, _ := b.DoWithHeaders(t, "POST", base+"/confirm", nil, checkout); st != 409 || !strings.Contains(string(body), "ORDER_AMBIGUOUS") {
			t.Errorf("%s: the checkout confirming an orderId two shoppers hold without its customer: %d %s; want 409 ORDER_AMBIGUOUS", code, st, body)
		}
		if st, body, _ := b.DoWithHeaders(t, "POST", base+"/confirm?customerId=77", nil, checkout); st != 200 || !strings.Contains(string(body), "CONFIRMED") {
			t.Errorf("%s: the checkout confirming 77's order: %d %s", code, st, body)
		}
		if st, body, _ := b.DoWithHeaders(t, "DELETE", base+"?customerId=78", nil, checkout); st != 200 || !strings.Contains(string(body), "RELEASED") {
			t.Errorf("%s: the checkout releasing 78's order of the same orderId: %d %s", code, st, body)
		}
		if st, body := call("POST", base+"/confirm", "", s77); st != 200 || !strings.Contains(body, "CONFIRMED") {
			t.Errorf("%s: 77 reading back its confirmed order: %d %s", code, st, body)
		}
	}
	quotas := map[string]string{"X-API-Key": quotaKey}
	if st, body, _ := b.DoWithHeaders(t, "POST", "/quotas/deduct", deduct("svc-1", 1, "DEVICE", "d-victim"), quotas); st != 200 {
		t.Errorf("the quota service deducting 77's device: %d %s", st, body)
	}
	if got := used("DEVICE", "d-victim"); got != "2" {
		t.Errorf("77's device after the service's deduct: used %s; want 2", got)
	}
	if st, body, _ := b.DoWithHeaders(t, "POST", "/quotas/rollback", `{"bizId":7,"idemKey":"order-77"}`, quotas); st != 200 ||
		strings.Contains(string(body), "d-victim") {
		t.Errorf("the service rolling back its order-77 (never used by a service): %d %s; want nothing of 77's", st, body)
	}
	if st, body, _ := b.DoWithHeaders(t, "POST", "/quotas/rollback?customerId=77", `{"bizId":7,"idemKey":"order-77"}`, quotas); st != 200 ||
		!strings.Contains(string(body), "d-victim") || !strings.Contains(string(body), "+33677777777") {
		t.Errorf("the service rolling back 77's order-77, naming 77: %d %s; want 77's counters given back", st, body)
	}
	for _, c := range []struct{ typ, identity, want string }{{"USER", "77", "0"}, {"DEVICE", "d-victim", "1"}, {"PHONE", "+33677777777", "0"}} {
		if got := used(c.typ, c.identity); got != c.want {
			t.Errorf("77's %s after the service rolled back its order-77: used %s; want %s", c.typ, got, c.want)
		}
	}

	// A sold-out flash voucher's holder is a shopper's orderId as the shopper sends it: 77's
	// retry is forwarded and answered its 201, a new order is the edge's 409.
	b.CreateVoucher(t, backendtest.Voucher{Code: "SHOPLAST", Discount: 100, TotalLimit: 1, FlashSale: true})
	last := `{"customerId":77,"orderId":"o-last","orderAmount":1000}`
	if st, body := call("POST", "/vouchers/SHOPLAST/reservations", last, s77); st != 201 {
		t.Fatalf("77 takes SHOPLAST's one use: %d %s", st, body)
	}
	testkit.Eventually(t, "the edge to hold SHOPLAST sold out", func() bool { return e.knows("SHOPLAST") })
	if st, body := call("POST", "/vouchers/SHOPLAST/reservations", last, s77); st != 201 || body != `{"orderId":"o-last","discountAmount":100}` {
		t.Errorf("77's retry once the edge holds the sell-out: %d %s; want its 201 again", st, body)
	}
	if st, body := call("POST", "/vouchers/SHOPLAST/reservations", `{"customerId":78,"orderId":"o-late","orderAmount":1000}`, s78); st != 409 {
		t.Errorf("78's new order once sold out: %d %s; want 409", st, body)
	}
	sameOnAHeldVoucher(t, e.Addr, "SHOPLAST", "o-last", s78)

	// A paused flash voucher: 78 is told of 77's held orderId what it is told of a new one,
	// while 77's retry still gets its 201.
	b.CreateVoucher(t, backendtest.Voucher{Code: "SHOPHALT", Discount: 100, TotalLimit: 5, FlashSale: true})
	halt := `{"customerId":77,"orderId":"o-halt","orderAmount":1000}`
	if st, body := call("POST", "/vouchers/SHOPHALT/reservations", halt, s77); st != 201 {
		t.Fatalf("77 reserves SHOPHALT: %d %s", st, body)
	}
	editVoucher(t, b, "SHOPHALT", `{"active":false}`)
	testkit.Eventually(t, "the edge to hold SHOPHALT paused", func() bool { return e.pausedAtTheEdge("SHOPHALT") })
	if st, body := call("POST", "/vouchers/SHOPHALT/reservations", halt, s77); st != 201 || body != `{"orderId":"o-halt","discountAmount":100}` {
		t.Errorf("77's retry once the edge holds the pause: %d %s; want its 201 again", st, body)
	}
	sameOnAHeldVoucher(t, e.Addr, "SHOPHALT", "o-halt", s78)
}

// sameOnAHeldVoucher checks that, on a voucher the edge holds sold out or paused, shopper 78
// (token s78) is told of another customer's held orderId exactly what it is told of an orderId
// nobody used: status, body and header, on a reservation and its dry run, with its own token,
// with none, and naming another customer.
func sameOnAHeldVoucher(t *testing.T, addr, code, held, s78 string) {
	t.Helper()
	for _, path := range []string{"/vouchers/" + code + "/reservations", "/vouchers/" + code + "/validate"} {
		for _, tt := range []struct{ name, customer, tok string }{
			{"78 with its token", "78", s78}, {"without a token", "78", ""}, {"78 naming customer 77", "77", s78},
		} {
			body := func(order string) string {
				return `{"customerId":` + tt.customer + `,"orderId":"` + order + `","orderAmount":1000}`
			}
			st, b, h := shopperAnswer(t, addr, "POST", path, body(held), tt.tok)
			nst, nb, nh := shopperAnswer(t, addr, "POST", path, body("o-nobodys"), tt.tok)
			if st != nst || b != nb || h != nh {
				t.Errorf("%s %s, another's held orderId: %d %s\n%s; one nobody used: %d %s\n%s; want the same answer",
					path, tt.name, st, b, h, nst, nb, nh)
			}
		}
	}
}
