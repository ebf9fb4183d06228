package api_test

import (
	"encoding/json"
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

// From the edge, a subject reserves only for itself and confirms or releases only its own
// order; a buyer cannot release another buyer's reservation. Without a subject the edge's key
// acts for anyone, as a service does.
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
			st, c, _ := (keyed{method: method, uri: uri, body: body, secret: secretEdge, subject: subject}).send(t, b)
			if st == 403 {
				forbidden++
			}
			return st, c
		}

		if st, c := asEdge("POST", base, `{"customerId":"alice","orderId":"`+code+`-a","orderAmount":100}`, "bob"); st != 403 || c != "FORBIDDEN" {
			t.Errorf("%s: bob reserving for alice: %d %s; want 403", code, st, c)
		}
		if st, c := asEdge("POST", base, `{"customerId":"alice","orderId":"`+code+`-a","orderAmount":100}`, "alice"); st != 201 {
			t.Fatalf("%s: alice reserving for herself: %d %s", code, st, c)
		}
		if st, c := asEdge("POST", base, `{"customerId":"bob","orderId":"`+code+`-b","orderAmount":100}`, ""); st != 201 {
			t.Fatalf("%s: the edge reserving for bob without a subject: %d %s", code, st, c)
		}

		for _, r := range []struct{ method, uri string }{
			{"POST", base + "/" + code + "-a/confirm"}, {"DELETE", base + "/" + code + "-a"},
		} {
			if st, c := asEdge(r.method, r.uri, "", "bob"); st != 403 || c != "FORBIDDEN" {
				t.Errorf("%s: bob: %s %s: %d %s; want 403", code, r.method, r.uri, st, c)
			}
		}
		if got := redemptionStatus(t, b, code, code+"-a"); got != wire.StatusReserved {
			t.Errorf("%s: alice's order after bob's tries: %s; want RESERVED", code, got)
		}
		if st, c := asEdge("DELETE", base+"/"+code+"-a", "", "alice"); st != 200 {
			t.Errorf("%s: alice releasing her order: %d %s", code, st, c)
		}
		if st, c := asEdge("POST", base+"/"+code+"-b/confirm", "", "bob"); st != 200 {
			t.Errorf("%s: bob confirming his order: %d %s", code, st, c)
		}
		// an order that does not exist is not found for a subject, as without one
		if st, c := asEdge("POST", base+"/"+code+"-none/confirm", "", "bob"); st != 404 || c != wire.CodeReservationNotFound {
			t.Errorf("%s: confirming no order: %d %s; want 404", code, st, c)
		}
		if got := redemptionStatus(t, b, code, code+"-a"); got != wire.StatusReleased {
			t.Errorf("%s: alice's order: %s; want RELEASED", code, got)
		}
	}
	if got := keyRefusals(t, b, "subject_mismatch"); forbidden != 6 || got != float64(forbidden) {
		t.Errorf("subject mismatches counted: %v, 403s answered: %d; want 6 of each (a reserve, a confirm, a release per voucher)", got, forbidden)
	}
	if got := keyRefusals(t, b, "subject_untrusted"); got != 0 {
		t.Errorf("untrusted subjects counted: %v; want 0 (every subject came with the edge's key)", got)
	}
}

// From the edge, a subject deducts only its own USER identity's quota (other identity types
// are not the subject's to match), rolls back only an idemKey whose USER identities are its own,
// and reads only its own USER usage.
func TestSubjectDeductsAndRollsBackOnlyItsOwnQuota(t *testing.T) {
	b, _ := startWithKeys(t, testKeys...)
	if st, body := b.Do(t, "POST", "/admin/quota-rules", dayRule); st != 201 {
		t.Fatalf("rule: %d %s", st, body)
	}
	asEdge := func(method, uri, body, subject string) (int, string) {
		st, c, _ := (keyed{method: method, uri: uri, body: body, secret: secretEdge, subject: subject}).send(t, b)
		return st, c
	}
	deduct := func(idemKey, user string) string {
		return `{"bizId":1,"idemKey":"` + idemKey + `","items":[{"identityType":"USER","identity":"` + user +
			`","dimensions":["ITEM:1001"]},{"identityType":"DEVICE","identity":"d-1","dimensions":["ITEM:1001"]}]}`
	}
	if st, c := asEdge("POST", "/quotas/deduct", deduct("k-bob", "bob"), "alice"); st != 403 || c != "FORBIDDEN" {
		t.Errorf("alice deducting bob's quota: %d %s; want 403", st, c)
	}
	if st, c := asEdge("POST", "/quotas/deduct", deduct("k-alice", "alice"), "alice"); st != 200 {
		t.Fatalf("alice deducting her quota: %d %s", st, c)
	}
	if st, c := asEdge("POST", "/quotas/deduct", deduct("k-bob", "bob"), ""); st != 200 {
		t.Fatalf("the edge deducting bob's quota without a subject: %d %s", st, c)
	}

	if st, c := asEdge("POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k-bob"}`, "alice"); st != 403 || c != "FORBIDDEN" {
		t.Errorf("alice rolling back bob's deduct: %d %s; want 403", st, c)
	}
	usage := func(user, subject string) (int, int64) {
		st, body, _ := b.DoWithHeaders(t, "GET", "/quotas/usage?bizId=1&identityType=USER&identity="+user+"&dimension=ITEM:1001", nil,
			map[string]string{"X-API-Key": secretEdge, "X-VG-Subject": subject})
		var u wire.QuotaUsageResponse
		if st == 200 {
			if err := json.Unmarshal(body, &u); err != nil || len(u.Counters) != 1 {
				t.Fatalf("usage %s: %v", body, err)
			}
			return st, u.Counters[0].Used
		}
		return st, -1
	}
	if st, used := usage("bob", "bob"); st != 200 || used != 1 {
		t.Errorf("bob's use after alice's rollback try: %d, used %d; want 200 and 1", st, used)
	}
	if st, _ := usage("bob", "alice"); st != 403 {
		t.Errorf("alice reading bob's usage: %d; want 403", st)
	}
	if st, c := asEdge("POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k-alice"}`, "alice"); st != 200 {
		t.Errorf("alice rolling back her deduct: %d %s", st, c)
	}
	if st, used := usage("alice", "alice"); st != 200 || used != 0 {
		t.Errorf("alice's use after her rollback: %d, used %d; want 200 and 0", st, used)
	}
	// an idemKey nothing deducted with has no USER identity: nothing to give back, allowed
	if st, c := asEdge("POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k-unknown"}`, "alice"); st != 200 {
		t.Errorf("alice rolling back an unknown idemKey: %d %s", st, c)
	}
}

// A subject's rollback of an idemKey nothing has deducted with yet gives back nothing and
// leaves no rolled-back mark, so mallory cannot bar alice's later deduct with that idemKey by
// guessing it. A service's rollback still leaves the mark: a rollback sent before a timed-out
// deduct lands wins.
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

	if st, _, body := call("/quotas/rollback", rollback("k-alice"), secretEdge, "mallory"); st != 200 || body != `{"idemKey":"k-alice","returned":[]}` {
		t.Fatalf("mallory rolling back an idemKey nothing deducted with: %d %s; want 200 with nothing returned", st, body)
	}
	if st, code, body := call("/quotas/deduct", deduct("k-alice", "alice"), secretEdge, "alice"); st != 200 {
		t.Fatalf("alice's deduct after mallory's rollback of its idemKey: %d %s %s; want 200", st, code, body)
	}
	if n := used("alice"); n != 1 {
		t.Errorf("alice's use: %d; want 1", n)
	}
	if st, _, _ := call("/quotas/rollback", rollback("k-alice"), secretEdge, "mallory"); st != 403 {
		t.Errorf("mallory rolling back alice's deduct once noted: %d; want 403", st)
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

	// A shopper's own rollback sent before their deduct lands does not bar it; once the deduct
	// is noted, rolling back again gives it back.
	if st, _, _ := call("/quotas/rollback", rollback("k-carol"), secretEdge, "carol"); st != 200 {
		t.Fatalf("carol's early rollback: %d", st)
	}
	if st, code, body := call("/quotas/deduct", deduct("k-carol", "carol"), secretEdge, "carol"); st != 200 {
		t.Fatalf("carol's deduct after her early rollback: %d %s %s; want 200", st, code, body)
	}
	if st, _, body := call("/quotas/rollback", rollback("k-carol"), secretEdge, "carol"); st != 200 || !strings.Contains(body, `"amount":1`) {
		t.Errorf("carol's rollback once her deduct is noted: %d %s; want 200 giving back 1", st, body)
	}
	if n := used("carol"); n != 0 {
		t.Errorf("carol's use after her rollback: %d; want 0", n)
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
