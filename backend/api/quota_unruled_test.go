package api_test

import (
	"strings"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
)

// A deduct or check of a bizId no rule covers passes with the warning NO_QUOTA_RULES (nothing is
// limited, and the caller can see it), or is refused 422 NO_QUOTA_RULES with
// VG_QUOTA_NO_RULES=refuse; a covered one has no warning.
func TestDeductsNoRuleCoversSaySo(t *testing.T) {
	start := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	b, _ := startQuotas(t, start, nil)
	if st, body := b.Do(t, "POST", "/admin/quota-rules", dayRule); st != 201 {
		t.Fatalf("rule: %d %s", st, body)
	}
	deduct := func(biz, key string) string {
		return `{"bizId":` + biz + `,"idemKey":"` + key + `","items":[{"identityType":"USER","identity":"42","dimensions":["ITEM:1001"]}]}`
	}
	for _, path := range []string{"/quotas/deduct", "/quotas/check"} {
		if st, body := b.Do(t, "POST", path, deduct("17", "k-typo")); st != 200 || !strings.Contains(string(body), `"warning":"NO_QUOTA_RULES"`) {
			t.Errorf("%s of bizId 17, no rule: %d %s; want 200 with warning NO_QUOTA_RULES", path, st, body)
		}
		if st, body := b.Do(t, "POST", path, deduct("1", "k-real")); st != 200 || strings.Contains(string(body), "warning") {
			t.Errorf("%s of bizId 1, its rule: %d %s; want 200 without a warning", path, st, body)
		}
	}

	cfg := backendtest.Config(t)
	cfg.QuotaNoRules = "refuse"
	strict, _ := startQuotas(t, start, &cfg)
	if st, body := strict.Do(t, "POST", "/quotas/deduct", deduct("17", "k-typo")); st != 422 || !strings.Contains(string(body), `"error":"NO_QUOTA_RULES"`) {
		t.Errorf("with VG_QUOTA_NO_RULES=refuse, a deduct of bizId 17: %d %s; want 422 NO_QUOTA_RULES", st, body)
	}
	if st, body := strict.Do(t, "POST", "/quotas/check", deduct("17", "k-typo")); st != 200 || !strings.Contains(string(body), `"error":"NO_QUOTA_RULES"`) {
		t.Errorf("with VG_QUOTA_NO_RULES=refuse, its check: %d %s; want 200 not passing, NO_QUOTA_RULES", st, body)
	}
}
