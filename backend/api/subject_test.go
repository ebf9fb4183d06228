package api_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"vouchergate/backend/api"
	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// keyRefusals reads b's count of requests refused for reason (keys.go's reason label).
func keyRefusals(t *testing.T, b *backendtest.Backend, reason string) float64 {
	t.Helper()
	return testkit.ScrapeMetrics(t, b.OpsURL+"/metrics").Count(t, "vouchergate_api_key_refusals_total", "reason", reason)
}

// X-VG-Subject is trusted only from a key with scope edge: from another key, or with no keys
// configured, the request is refused whole (403) and changes nothing.
func TestSubjectFromANonEdgeKeyIsNotTrusted(t *testing.T) {
	b, _ := startWithKeys(t, testKeys...)
	b.CreateVoucher(t, backendtest.Voucher{Code: "SUBJ", Discount: 100, TotalLimit: 10})
	reserve := keyed{method: "POST", uri: "/vouchers/SUBJ/reservations", body: `{"customerId":"alice","orderId":"o-a","orderAmount":100}`,
		secret: secretReserve, subject: "alice"}
	if st, code, _ := reserve.send(t, b); st != 403 || code != "FORBIDDEN" {
		t.Errorf("a subject from a reserve-only key: %d %s; want 403 FORBIDDEN", st, code)
	}
	if st, _ := b.Do(t, "POST", "/vouchers/SUBJ/reservations/o-a/confirm", nil); st != 401 {
		t.Fatalf("confirm without a key: %d", st)
	}
	if got := redemptionStatus(t, b, "SUBJ", "o-a"); got != "" {
		t.Errorf("the refused reservation was made: %s", got)
	}

	open := backendtest.Start(t, backendtest.Config(t))
	open.CreateVoucher(t, backendtest.Voucher{Code: "SUBJ", Discount: 100, TotalLimit: 10})
	reserve.secret = ""
	if st, code, _ := reserve.send(t, open); st != 403 || code != "FORBIDDEN" {
		t.Errorf("a subject with no keys configured: %d %s; want 403 FORBIDDEN", st, code)
	}

	// each refusal counted once, under its reason
	for _, c := range []struct {
		b      *backendtest.Backend
		name   string
		reason string
		want   float64
	}{
		{b, "keyed", "subject_untrusted", 1}, {b, "keyed", "missing", 1}, {b, "keyed", "subject_mismatch", 0},
		{open, "keyless", "subject_untrusted", 1}, {open, "keyless", "subject_mismatch", 0},
	} {
		if got := keyRefusals(t, c.b, c.reason); got != c.want {
			t.Errorf("%s backend: refusals {reason=%q}: %v; want %v", c.name, c.reason, got, c.want)
		}
	}
}

// redemptionStatus reads the order's status through the admin list ("" when it has none).
func redemptionStatus(t *testing.T, b *backendtest.Backend, code, order string) string {
	t.Helper()
	st, body := b.Do(t, "GET", "/admin/vouchers/"+code+"/redemptions?limit=100", nil)
	if st != 200 {
		t.Fatalf("list redemptions: %d %s", st, body)
	}
	var page wire.RedemptionPage
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("redemptions %s: %v", body, err)
	}
	for _, r := range page.Redemptions {
		if r.OrderID == order {
			return r.Status
		}
	}
	return ""
}

// From the edge, a shopper reserves only for itself, and its orderIds are its own: another
// shopper's confirm or release of them is answered exactly as for an order nobody reserved, and
// another shopper reserving the same orderId string gets a reservation of its own instead of
// ALREADY_USED. A service confirms a shopper's order by the plain orderId, naming the customer
// when several shoppers reserved it.
func TestSubjectActsOnlyOnItsOwnOrders(t *testing.T) {
	b, _ := startWithKeys(t, testKeys...)
	forbidden := 0 // 403s answered, each to be counted as a subject mismatch
	for _, flash := range []bool{false, true} {
		code := "OWN"
		if flash {
			code = "OWNFLASH"
		}
		b.CreateVoucher(t, backendtest.Voucher{Code: code, Discount: 100, TotalLimit: 10, FlashSale: flash})
		base := "/vouchers/" + code + "/reservations"
		asEdge := func(method, uri, body, subject string) (int, string) {
			st, answer, _ := b.DoWithHeaders(t, method, uri, body, withSubject(secretEdge, subject))
			if st == 403 {
				forbidden++
			}
			return st, string(answer)
		}
		reserve := func(customer, order string) string {
			return `{"customerId":"` + customer + `","orderId":"` + order + `","orderAmount":100}`
		}
		a := code + "-a"

		if st, body := asEdge("POST", base, reserve("alice", a), "bob"); st != 403 {
			t.Errorf("%s: bob reserving for alice: %d %s; want 403", code, st, body)
		}
		if st, body := asEdge("POST", base, reserve("alice", a), "alice"); st != 201 || body != `{"orderId":"`+a+`","discountAmount":100}` {
			t.Fatalf("%s: alice reserving for herself: %d %s", code, st, body)
		}
		if st, body := asEdge("POST", base, reserve("bob", code+"-b"), ""); st != 201 {
			t.Fatalf("%s: the edge reserving for bob without a subject: %d %s", code, st, body)
		}

		// bob on alice's order: the answers of an order nobody reserved, byte for byte
		for _, r := range []struct{ method, path string }{{"POST", "/confirm"}, {"DELETE", ""}} {
			st, body := asEdge(r.method, base+"/"+a+r.path, "", "bob")
			nst, nbody := asEdge(r.method, base+"/"+code+"-none"+r.path, "", "bob")
			nbody = strings.ReplaceAll(nbody, code+"-none", a)
			if st != 404 || st != nst || body != nbody {
				t.Errorf("%s: bob %s alice's order: %d %s; an order nobody reserved: %d %s; want the same 404",
					code, r.method, st, body, nst, nbody)
			}
		}
		if got := redemptionStatus(t, b, code, a); got != wire.StatusReserved {
			t.Errorf("%s: alice's order after bob's tries: %s; want RESERVED", code, got)
		}
		// dave's own order of the same string: his, beside alice's
		if st, body := asEdge("POST", base, reserve("dave", a), "dave"); st != 201 {
			t.Errorf("%s: dave reserving an orderId alice used: %d %s; want 201 (his own order)", code, st, body)
		}
		// a service names a shopper's order by its orderId, with the customer when two hold it
		if st, body := asEdge("POST", base+"/"+a+"/confirm", "", ""); st != 409 || !strings.Contains(body, wire.CodeOrderAmbiguous) {
			t.Errorf("%s: a service confirming %s that two shoppers reserved: %d %s; want 409 %s", code, a, st, body, wire.CodeOrderAmbiguous)
		}
		if st, body := asEdge("DELETE", base+"/"+a+"?customerId=dave", "", ""); st != 200 || body != `{"orderId":"`+a+`","status":"RELEASED"}` {
			t.Errorf("%s: a service releasing dave's %s: %d %s", code, a, st, body)
		}
		if st, body := asEdge("POST", base+"/"+a+"/confirm", "", ""); st != 200 || body != `{"orderId":"`+a+`","status":"CONFIRMED"}` {
			t.Errorf("%s: a service confirming %s, alice's the only one held: %d %s", code, a, st, body)
		}
		if st, body := asEdge("POST", base+"/"+a+"/confirm", "", "alice"); st != 200 {
			t.Errorf("%s: alice confirming her confirmed order again: %d %s", code, st, body)
		}
		// a shopper confirms a service's order made for it, not one made for another
		if st, body := asEdge("POST", base+"/"+code+"-b/confirm", "", "alice"); st != 404 {
			t.Errorf("%s: alice confirming bob's order: %d %s; want 404", code, st, body)
		}
		if st, body := asEdge("POST", base+"/"+code+"-b/confirm", "", "bob"); st != 200 {
			t.Errorf("%s: bob confirming the order a service made for him: %d %s", code, st, body)
		}
		if st, body := asEdge("POST", base+"/"+code+"-b/confirm?customerId=a/b", "", ""); st != 400 {
			t.Errorf("%s: a service naming customer a/b: %d %s; want 400", code, st, body)
		}
	}
	if got := keyRefusals(t, b, "subject_mismatch"); forbidden != 2 || got != float64(forbidden) {
		t.Errorf("subject mismatches counted: %v, 403s answered: %d; want 2 of each (a reserve per voucher)", got, forbidden)
	}
	if got := keyRefusals(t, b, "subject_untrusted"); got != 0 {
		t.Errorf("untrusted subjects counted: %v; want 0 (every subject came with the edge's key)", got)
	}
	// the admin's list says which orders shoppers made, by the orderId they sent
	st, body := b.Do(t, "GET", "/admin/vouchers/OWN/redemptions?limit=10", nil)
	var page wire.RedemptionPage
	if err := json.Unmarshal(body, &page); st != 200 || err != nil || len(page.Redemptions) != 3 {
		t.Fatalf("OWN's redemptions: %d %s (%v); want 3", st, body, err)
	}
	for _, r := range page.Redemptions {
		if want := r.OrderID != "OWN-b"; r.ByShopper != want || strings.Contains(r.OrderID, "/") {
			t.Errorf("redemption %+v: byShopper %v; want %v, with the orderId as sent", r, r.ByShopper, want)
		}
	}
}

// From the edge, a shopper deducts, checks and reads only its own quota identities: USER is its
// subject, DEVICE and PHONE those its token carries (X-VG-Identities). Its idemKeys are its own:
// another shopper's rollback of one answers as for an idemKey nobody used and gives nothing back.
func TestSubjectDeductsAndRollsBackOnlyItsOwnQuota(t *testing.T) {
	b, _ := startWithKeys(t, testKeys...)
	for _, typ := range []string{"USER", "DEVICE", "PHONE"} {
		if st, body := b.Do(t, "POST", "/admin/quota-rules", strings.Replace(dayRule, "USER", typ, 1)); st != 201 {
			t.Fatalf("rule: %d %s", st, body)
		}
	}
	testkit.Eventually(t, "the rules loaded", func() bool { return b.App.Quotas.Metrics().Rules == 3 })
	alice := map[string]string{"X-API-Key": secretEdge, api.SubjectHeader: "alice", api.IdentitiesHeader: "DEVICE=d-1&PHONE=%2B33611111111"}
	bob := map[string]string{"X-API-Key": secretEdge, api.SubjectHeader: "bob", api.IdentitiesHeader: "DEVICE=d-2"}
	call := func(method, uri, body string, h map[string]string) (int, string) {
		var b2 any
		if body != "" {
			b2 = body
		}
		st, answer, _ := b.DoWithHeaders(t, method, uri, b2, h)
		return st, string(answer)
	}
	deduct := func(idemKey, user, device string) string {
		return `{"bizId":1,"idemKey":"` + idemKey + `","items":[{"identityType":"USER","identity":"` + user +
			`","dimensions":["ITEM:1001"]},{"identityType":"DEVICE","identity":"` + device + `","dimensions":["ITEM:1001"]}]}`
	}
	for _, tt := range []struct{ what, body string }{
		{"bob's USER", deduct("k-x", "bob", "d-1")},
		{"bob's device", deduct("k-x", "alice", "d-2")},
		{"a phone her token does not carry", `{"bizId":1,"idemKey":"k-x","items":[{"identityType":"PHONE","identity":"+33622222222","dimensions":["ITEM:1001"]}]}`},
	} {
		for _, path := range []string{"/quotas/deduct", "/quotas/check"} {
			if st, body := call("POST", path, tt.body, alice); st != 403 || !strings.Contains(body, "FORBIDDEN") {
				t.Errorf("alice %s with %s: %d %s; want 403", path, tt.what, st, body)
			}
		}
	}
	if st, body := call("POST", "/quotas/deduct", deduct("k-1", "alice", "d-1"), alice); st != 200 {
		t.Fatalf("alice deducting her quota: %d %s", st, body)
	}
	if st, body := call("POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k-2","items":[{"identityType":"PHONE","identity":"+33611111111","dimensions":["ITEM:1001"]}]}`, alice); st != 200 {
		t.Fatalf("alice deducting her phone's quota: %d %s", st, body)
	}
	// bob's rollback of alice's idemKey: as one nobody used
	st, body := call("POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k-1"}`, bob)
	nst, nbody := call("POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k-1"}`, map[string]string{"X-API-Key": secretEdge, api.SubjectHeader: "carol"})
	if st != 200 || body != `{"idemKey":"k-1","returned":[]}` || st != nst || body != nbody {
		t.Errorf("bob rolling back alice's k-1: %d %s; carol, who never used it: %d %s; want the same 200 with nothing returned", st, body, nst, nbody)
	}
	usage := func(typ, identity string, h map[string]string) (int, int64) {
		st, body := call("GET", "/quotas/usage?bizId=1&identityType="+typ+"&identity="+identity+"&dimension=ITEM:1001", "", h)
		var u wire.QuotaUsageResponse
		if st == 200 {
			if err := json.Unmarshal([]byte(body), &u); err != nil || len(u.Counters) != 1 {
				t.Fatalf("usage %s: %v", body, err)
			}
			return st, u.Counters[0].Used
		}
		return st, -1
	}
	for _, tt := range []struct{ typ, identity string }{{"USER", "alice"}, {"DEVICE", "d-1"}, {"PHONE", "%2B33611111111"}} {
		if st, used := usage(tt.typ, tt.identity, alice); st != 200 || used != 1 {
			t.Errorf("alice's %s use after bob's rollback: %d, used %d; want 200 and 1", tt.typ, st, used)
		}
		if st, _ := usage(tt.typ, tt.identity, bob); st != 403 {
			t.Errorf("bob reading alice's %s: %d; want 403", tt.typ, st)
		}
	}
	if st, used := usage("DEVICE", "d-2", bob); st != 200 || used != 0 {
		t.Errorf("bob reading his own device: %d, used %d; want 200 and 0", st, used)
	}
	if st, body := call("POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k-1"}`, alice); st != 200 || !strings.Contains(body, `"amount":1`) {
		t.Errorf("alice rolling back her deduct: %d %s", st, body)
	}
	if st, used := usage("USER", "alice", alice); st != 200 || used != 0 {
		t.Errorf("alice's use after her rollback: %d, used %d; want 200 and 0", st, used)
	}
	// a service still deducts for anyone, and its idemKeys are not a shopper's
	service := map[string]string{"X-API-Key": secretQuota}
	if st, body := call("POST", "/quotas/deduct", deduct("k-2", "bob", "d-9"), service); st != 200 {
		t.Errorf("a service deducting bob's quota with the idemKey alice used: %d %s", st, body)
	}
	if st, body := call("POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k-2"}`, service); st != 200 || !strings.Contains(body, `"identity":"bob"`) || strings.Contains(body, "alice") {
		t.Errorf("the service's rollback of its k-2: %d %s; want bob's counters given back, none of alice's", st, body)
	}
}

// Two shoppers using one idemKey string never meet: the second deduct counts for its own
// shopper (not answered from the first's), each rolls back only its own, and a shopper's
// rollback of an idemKey it has not used yet gives back nothing and bars no one else. Within
// each scope the mark keeps its meaning: a rollback sent before a timed-out deduct lands wins,
// for a service and for a shopper alike.
func TestSubjectCannotBarAnotherUsersIdemKey(t *testing.T) {
	b, _ := startWithKeys(t, testKeys...)
	if st, body := b.Do(t, "POST", "/admin/quota-rules", dayRule); st != 201 {
		t.Fatalf("rule: %d %s", st, body)
	}
	call := func(uri, body, secret, subject string) (int, string, string) {
		st, answer, _ := b.DoWithHeaders(t, "POST", uri, []byte(body), withSubject(secret, subject))
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(answer, &e)
		return st, e.Error, string(answer)
	}
	deduct := func(idemKey, user string) string {
		return `{"bizId":1,"idemKey":"` + idemKey + `","items":[{"identityType":"USER","identity":"` + user + `","dimensions":["ITEM:1001"]}]}`
	}
	rollback := func(idemKey string) string { return `{"bizId":1,"idemKey":"` + idemKey + `"}` }
	used := func(user string) int64 {
		st, body, _ := b.DoWithHeaders(t, "GET", "/quotas/usage?bizId=1&identityType=USER&identity="+user+"&dimension=ITEM:1001", nil,
			map[string]string{"X-API-Key": secretQuota})
		var u wire.QuotaUsageResponse
		if err := json.Unmarshal(body, &u); st != 200 || err != nil || len(u.Counters) != 1 {
			t.Fatalf("usage of %s: %d %s (%v)", user, st, body, err)
		}
		return u.Counters[0].Used
	}

	// mallory deducts first under the idemKey alice will use, then rolls it back early
	if st, _, body := call("/quotas/deduct", deduct("order-5000", "mallory"), secretEdge, "mallory"); st != 200 {
		t.Fatalf("mallory's deduct under order-5000: %d %s", st, body)
	}
	if st, _, body := call("/quotas/deduct", deduct("order-5000", "alice"), secretEdge, "alice"); st != 200 || !strings.Contains(body, `"identity":"alice"`) {
		t.Fatalf("alice's deduct under the idemKey mallory used: %d %s; want 200 with her own counter", st, body)
	}
	if n := used("alice"); n != 1 {
		t.Errorf("alice's use: %d; want 1", n)
	}
	if st, _, body := call("/quotas/rollback", rollback("k-alice"), secretEdge, "mallory"); st != 200 || body != `{"idemKey":"k-alice","returned":[]}` {
		t.Fatalf("mallory rolling back an idemKey she never used: %d %s; want 200 with nothing returned", st, body)
	}
	if st, code, body := call("/quotas/deduct", deduct("k-alice", "alice"), secretEdge, "alice"); st != 200 {
		t.Fatalf("alice's deduct after mallory's rollback of its idemKey: %d %s %s; want 200", st, code, body)
	}
	if st, _, body := call("/quotas/rollback", rollback("order-5000"), secretEdge, "mallory"); st != 200 || strings.Contains(body, "alice") {
		t.Errorf("mallory rolling back her own order-5000: %d %s; want hers only", st, body)
	}
	if n := used("alice"); n != 2 {
		t.Errorf("alice's use after mallory's rollbacks: %d; want 2", n)
	}
	if st, _, body := call("/quotas/rollback", rollback("order-5000"), secretEdge, "alice"); st != 200 || !strings.Contains(body, `"amount":1`) {
		t.Errorf("alice rolling back her order-5000: %d %s; want 1 given back", st, body)
	}
	if n, m := used("alice"), used("mallory"); n != 1 || m != 0 {
		t.Errorf("uses after both rollbacks: alice %d, mallory %d; want 1 and 0", n, m)
	}

	// A service (no subject) rolling back first still bars the deduct that lands later.
	if st, _, body := call("/quotas/rollback", rollback("k-late"), secretQuota, ""); st != 200 {
		t.Fatalf("a service rolling back before its deduct: %d %s", st, body)
	}
	if st, code, body := call("/quotas/deduct", deduct("k-late", "bob"), secretQuota, ""); st != 409 || code != wire.CodeQuotaRolledBack {
		t.Errorf("the deduct landing after the service's rollback: %d %s; want 409 %s", st, body, wire.CodeQuotaRolledBack)
	}
	if n := used("bob"); n != 0 {
		t.Errorf("bob's use after the barred deduct: %d; want 0", n)
	}
	// ...and a shopper's idemKey of the same string is not barred by it
	if st, _, body := call("/quotas/deduct", deduct("k-late", "bob"), secretEdge, "bob"); st != 200 {
		t.Errorf("bob's own k-late after the service's rollback of its k-late: %d %s; want 200", st, body)
	}

	// A shopper's own rollback sent before its deduct lands wins as a service's does: the
	// deduct is refused and counts nothing. Another shopper's, and a service's, k-carol are not
	// barred by it.
	if st, _, body := call("/quotas/rollback", rollback("k-carol"), secretEdge, "carol"); st != 200 || body != `{"idemKey":"k-carol","returned":[]}` {
		t.Fatalf("carol's early rollback: %d %s; want 200 with nothing returned", st, body)
	}
	if st, code, body := call("/quotas/deduct", deduct("k-carol", "carol"), secretEdge, "carol"); st != 409 || code != wire.CodeQuotaRolledBack {
		t.Errorf("carol's deduct landing after her early rollback: %d %s; want 409 %s", st, body, wire.CodeQuotaRolledBack)
	}
	if n := used("carol"); n != 0 {
		t.Errorf("carol's use after her barred deduct: %d; want 0", n)
	}
	if st, _, body := call("/quotas/deduct", deduct("k-carol", "dave"), secretEdge, "dave"); st != 200 {
		t.Errorf("dave's k-carol after carol's early rollback of hers: %d %s; want 200", st, body)
	}
	if st, _, body := call("/quotas/deduct", deduct("k-carol", "erin"), secretQuota, ""); st != 200 {
		t.Errorf("a service's k-carol after carol's early rollback of hers: %d %s; want 200", st, body)
	}
	if n, m := used("dave"), used("erin"); n != 1 || m != 1 {
		t.Errorf("dave's and erin's uses: %d and %d; want 1 each", n, m)
	}
}

// A service reaches a shopper's deduct with ?customerId= naming the shopper: a checkout rolls
// back (whole or in part) and checks the deduct a shopper made through the edge under the
// order's idemKey. Without it the service's own idemKeys are meant; a shopper's call ignores it;
// a customerId no subject can be is a 400.
func TestServiceReachesAShoppersDeductByCustomerID(t *testing.T) {
	b, _ := startWithKeys(t, testKeys...)
	if st, body := b.Do(t, "POST", "/admin/quota-rules", dayRule); st != 201 {
		t.Fatalf("rule: %d %s", st, body)
	}
	call := func(uri, body, secret, subject string) (int, string) {
		st, answer, _ := b.DoWithHeaders(t, "POST", uri, []byte(body), withSubject(secret, subject))
		return st, string(answer)
	}
	deduct := func(idemKey, user string, amount int) string {
		return `{"bizId":1,"idemKey":"` + idemKey + `","items":[{"identityType":"USER","identity":"` + user +
			`","dimensions":["ITEM:1001"],"amount":` + strconv.Itoa(amount) + `}]}`
	}
	used := func(user string) string {
		st, body, _ := b.DoWithHeaders(t, "GET", "/quotas/usage?bizId=1&identityType=USER&identity="+user+"&dimension=ITEM:1001", nil,
			map[string]string{"X-API-Key": secretQuota})
		if st != 200 {
			t.Fatalf("usage of %s: %d %s", user, st, body)
		}
		return strings.SplitN(strings.SplitN(string(body), `"used":`, 2)[1], ",", 2)[0]
	}
	if st, body := call("/quotas/deduct", deduct("order-9", "alice", 2), secretEdge, "alice"); st != 200 {
		t.Fatalf("alice's deduct: %d %s", st, body)
	}

	// check: alice's recorded answer (used 2) with her name; without it the service's own
	// order-9, a new deduct of 2 more, past the limit of 3
	if st, body := call("/quotas/check?customerId=alice", deduct("order-9", "alice", 2), secretQuota, ""); st != 200 ||
		!strings.Contains(body, `"pass":true`) || !strings.Contains(body, `"used":2`) {
		t.Errorf("the service checking alice's order-9: %d %s; want her recorded pass, used 2", st, body)
	}
	if st, body := call("/quotas/check", deduct("order-9", "alice", 2), secretQuota, ""); st != 200 || !strings.Contains(body, `"error":"QUOTA_EXCEEDED"`) {
		t.Errorf("the service checking its own order-9: %d %s; want a new deduct's QUOTA_EXCEEDED", st, body)
	}
	// rollback: nothing of alice's without her name, nor from bob naming her; hers with it
	if st, body := call("/quotas/rollback", `{"bizId":1,"idemKey":"order-9"}`, secretQuota, ""); st != 200 || body != `{"idemKey":"order-9","returned":[]}` {
		t.Errorf("the service rolling back its own order-9: %d %s; want nothing returned", st, body)
	}
	if st, body := call("/quotas/rollback?customerId=alice", `{"bizId":1,"idemKey":"order-9"}`, secretEdge, "bob"); st != 200 || body != `{"idemKey":"order-9","returned":[]}` {
		t.Errorf("bob naming alice in his rollback: %d %s; want his own order-9, nothing returned", st, body)
	}
	if got := used("alice"); got != "2" {
		t.Fatalf("alice's use before the service names her: %s; want 2", got)
	}
	partial := `{"bizId":1,"idemKey":"order-9","rollbackKey":"refund-1","items":[{"identityType":"USER","identity":"alice","dimensions":["ITEM:1001"],"amount":1}]}`
	if st, body := call("/quotas/rollback?customerId=alice", partial, secretQuota, ""); st != 200 || !strings.Contains(body, `"amount":1`) {
		t.Errorf("the service refunding 1 of alice's order-9: %d %s; want 1 given back", st, body)
	}
	if got := used("alice"); got != "1" {
		t.Errorf("alice's use after the partial rollback: %s; want 1", got)
	}
	if st, body := call("/quotas/rollback?customerId=alice", `{"bizId":1,"idemKey":"order-9"}`, secretQuota, ""); st != 200 || !strings.Contains(body, `"amount":1`) {
		t.Errorf("the service rolling back the rest of alice's order-9: %d %s; want 1 given back", st, body)
	}
	if got := used("alice"); got != "0" {
		t.Errorf("alice's use after the service's rollback: %s; want 0", got)
	}
	if st, body := call("/quotas/deduct", deduct("order-9", "alice", 2), secretEdge, "alice"); st != 409 || !strings.Contains(body, wire.CodeQuotaRolledBack) {
		t.Errorf("alice's late retry of order-9: %d %s; want 409 %s", st, body, wire.CodeQuotaRolledBack)
	}
	for _, bad := range []string{"", strings.Repeat("a", wire.MaxCustomerLen+1), "al%01ice"} {
		for _, path := range []string{"/quotas/rollback", "/quotas/check"} {
			body := `{"bizId":1,"idemKey":"order-9"}`
			if path == "/quotas/check" {
				body = deduct("order-9", "alice", 1)
			}
			if st, answer := call(path+"?customerId="+bad, body, secretQuota, ""); st != 400 || !strings.Contains(answer, "customerId") {
				t.Errorf("%s?customerId=%q: %d %s; want 400 naming customerId", path, bad, st, answer)
			}
		}
	}
}

// withSubject is the headers of a call with a service key and, if any, a subject.
func withSubject(secret, subject string) map[string]string {
	h := map[string]string{"X-API-Key": secret}
	if subject != "" {
		h[api.SubjectHeader] = subject
	}
	return h
}
