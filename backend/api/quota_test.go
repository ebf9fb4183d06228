package api_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

// The backend routes the quota API: rules through the admin API, deduct, rollback and usage
// publicly, with admin auth on the rules.
func TestQuotaRoutes(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	rule := `{"bizId":1,"identityType":"USER","dimension":"ITEM:1001","limit":3,"window":{"type":"DAY","timezone":"Asia/Shanghai"}}`
	if st, body := b.DoWithHeader(t, "POST", "/admin/quota-rules", "Authorization", ""); st != 401 {
		t.Errorf("rules without the token: %d %s", st, body)
	}
	st, body := b.Do(t, "POST", "/admin/quota-rules", rule)
	var created wire.QuotaRule
	if err := json.Unmarshal(body, &created); st != 201 || err != nil || created.ID == 0 {
		t.Fatalf("create rule: %d %s", st, body)
	}
	if st, body := b.Do(t, "GET", fmt.Sprintf("/admin/quota-rules/%d", created.ID), nil); st != 200 {
		t.Errorf("get rule: %d %s", st, body)
	}
	if st, body := b.Do(t, "GET", "/admin/quota-rules", nil); st != 200 || !json.Valid(body) {
		t.Errorf("list rules: %d %s", st, body)
	}
	deduct := func(key string) (int, []byte) {
		return b.Do(t, "POST", "/quotas/deduct", fmt.Sprintf(
			`{"bizId":1,"idemKey":%q,"items":[{"identityType":"USER","identity":"u1","dimensions":["ITEM:1001"],"amount":1}]}`, key))
	}
	for i := range 3 {
		if st, body := deduct(fmt.Sprintf("k%d", i)); st != 200 {
			t.Fatalf("deduct %d: %d %s", i, st, body)
		}
	}
	if st, body := deduct("k3"); st != 409 {
		t.Errorf("fourth deduct: %d %s; want 409", st, body)
	}
	if st, body := b.Do(t, "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k0"}`); st != 200 {
		t.Errorf("rollback: %d %s", st, body)
	}
	if st, body := deduct("k4"); st != 200 {
		t.Errorf("deduct after a rollback: %d %s", st, body)
	}
	if st, body := b.Do(t, "GET", "/quotas/usage?bizId=1&identityType=USER&identity=u1&dimension=ITEM:1001", nil); st != 200 || !json.Valid(body) {
		t.Errorf("usage: %d %s", st, body)
	}
	if st, _ := b.Do(t, "GET", "/quotas/deduct", nil); st != 405 {
		t.Errorf("GET deduct: %d; want 405", st)
	}
	if st, body := b.Do(t, "DELETE", fmt.Sprintf("/admin/quota-rules/%d", created.ID), nil); st != 200 && st != 204 {
		t.Errorf("delete rule: %d %s", st, body)
	}
}
