package api_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

// checkChangesNothing sends a deduct's dry run, checks that neither store changed, then sends
// the deduct and checks that it answered what the dry run said: a pass is a 200 with the same
// counters; a refusal the deduct's 409 with the same code and, for QUOTA_EXCEEDED, the same body.
func checkChangesNothing(t *testing.T, b *backendtest.Backend, body string, wantCode string) {
	t.Helper()
	before := b.Snapshot(t)
	a := do(t, b, "POST", "/quotas/check", body)
	if changes := b.Snapshot(t).Changes(before); len(changes) > 0 {
		t.Errorf("check changed the stores: %v", changes)
	}
	var got wire.QuotaCheckResponse
	a.decode(t, &got)
	if a.status != 200 || got.Pass != (wantCode == "") || got.Error != wantCode {
		t.Fatalf("check %s: %d %s; want pass %v, error %q", body, a.status, a.body, wantCode == "", wantCode)
	}
	d := do(t, b, "POST", "/quotas/deduct", body)
	if got.Pass {
		var res wire.QuotaDeductResponse
		d.decode(t, &res)
		if d.status != 200 || res.IdemKey != got.IdemKey || !reflect.DeepEqual(res.Counters, got.Counters) {
			t.Fatalf("deduct after a passing check: %d %s; check said %s", d.status, d.body, a.body)
		}
		return
	}
	if d.status != 409 || errorCode(d.body) != wantCode {
		t.Fatalf("deduct after a check refusing %s: %d %s", wantCode, d.status, d.body)
	}
	if got.Exceeded != nil {
		var ex wire.QuotaExceeded
		d.decode(t, &ex)
		if !reflect.DeepEqual(&ex, got.Exceeded) {
			t.Fatalf("deduct's 409 %s; check said %s", d.body, a.body)
		}
	}
}

// A deduct's dry run changes neither store and predicts the deduct that follows: passes with
// the counters it reaches, for one identity and several, a used idemKey's replay, each refusal,
// and rolling entries that stopped counting (read past, not trimmed).
func TestQuotaCheckChangesNothingAndAgreesWithDeduct(t *testing.T) {
	b, clock := startQuotas(t, t0, nil)
	for _, rule := range []string{
		dayRule,
		`{"bizId":1,"identityType":"USER","dimension":"*","limit":4,"window":{"type":"ROLLING","size":"1h"}}`,
		`{"bizId":1,"identityType":"DEVICE","dimension":"ITEM:*","limit":2,"window":{"type":"WEEK","timezone":"Asia/Shanghai"}}`,
	} {
		if a := do(t, b, "POST", "/admin/quota-rules", rule); a.status != 201 {
			t.Fatalf("rule %s: %d %s", rule, a.status, a.body)
		}
	}
	user := func(key, amount string) string {
		return `{"bizId":1,"idemKey":"` + key + `","items":[{"identityType":"USER","identity":"7","dimensions":["ITEM:1001"],"amount":` + amount + `}]}`
	}
	both := func(key string) string {
		return `{"bizId":1,"idemKey":"` + key + `","items":[{"identityType":"USER","identity":"7","dimensions":["ITEM:1001"]},` +
			`{"identityType":"DEVICE","identity":"d-1","dimensions":["ITEM:1001"]}]}`
	}
	t.Run("pass", func(t *testing.T) { checkChangesNothing(t, b, user("k1", "2"), "") })
	t.Run("a used idemKey replays", func(t *testing.T) { checkChangesNothing(t, b, user("k1", "2"), "") })
	t.Run("the same idemKey with other items", func(t *testing.T) { checkChangesNothing(t, b, user("k1", "1"), wire.CodeIdemKeyReused) })
	t.Run("over the day's limit", func(t *testing.T) { checkChangesNothing(t, b, user("k2", "2"), wire.CodeQuotaExceeded) })
	t.Run("two identities", func(t *testing.T) { checkChangesNothing(t, b, both("k3"), "") })
	t.Run("two identities, the second full", func(t *testing.T) {
		clock.Advance(24 * time.Hour) // a new day for the user; the device's week holds 1 of 2
		checkChangesNothing(t, b, both("k4"), "")
		checkChangesNothing(t, b, both("k5"), wire.CodeQuotaExceeded)
	})
	t.Run("rolling entries past their window", func(t *testing.T) {
		clock.Advance(2 * time.Hour) // k3 and k4's rolling entries stop counting
		checkChangesNothing(t, b, user("k6", "2"), "")
	})
	if a := do(t, b, "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k6"}`); a.status != 200 {
		t.Fatalf("rollback: %d %s", a.status, a.body)
	}
	t.Run("a rolled back idemKey", func(t *testing.T) { checkChangesNothing(t, b, user("k6", "2"), wire.CodeQuotaRolledBack) })
	if a := do(t, b, "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"never-used"}`); a.status != 200 {
		t.Fatalf("rollback: %d %s", a.status, a.body)
	}
	t.Run("an idemKey rolled back before any deduct", func(t *testing.T) {
		checkChangesNothing(t, b, user("never-used", "1"), wire.CodeQuotaRolledBack)
	})
	t.Run("bad body", func(t *testing.T) {
		for _, path := range []string{"/quotas/check", "/quotas/deduct"} {
			if a := do(t, b, "POST", path, `{"bizId":1,"idemKey":"k","items":[],"x":1}`); a.status != 400 {
				t.Errorf("%s with an unknown field: %d %s; want 400", path, a.status, a.body)
			}
		}
	})
	var check wire.QuotaCheckResponse
	if err := json.Unmarshal(do(t, b, "POST", "/quotas/check", user("k9", "1")).body, &check); err != nil || !check.Pass {
		t.Fatalf("check after the story: %+v %v", check, err)
	}
}
