package api_test

import (
	"strings"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// With Redis down, the quota endpoints answer 503 UNAVAILABLE with Retry-After, never 500.
func TestQuotaRedisDownIs503(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a Redis")
	}
	srv := testkit.StartRedis(t)
	cfg := backendtest.Config(t)
	cfg.RedisURL = "redis://" + srv.Addr()
	b, _ := startQuotas(t, t0, &cfg)
	handler := b.App.API.Handle
	if a := replyOf(call(handler, "POST", "/admin/quota-rules", `{"bizId":1,"identityType":"USER","dimension":"*","limit":5,"window":{"type":"DAY","timezone":"UTC"}}`)); a.status != 201 {
		t.Fatalf("rule: %d %s", a.status, a.body)
	}
	srv.Kill()
	for _, r := range []struct{ method, uri, body string }{
		{"POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"u","dimensions":["ITEM:1"]}]}`},
		{"POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k"}`},
		{"GET", "/quotas/usage?bizId=1&identityType=USER&identity=u", ""},
	} {
		a := replyOf(call(handler, r.method, r.uri, r.body))
		if a.status != 503 || a.retryAfter == "" || !strings.Contains(string(a.body), wire.CodeUnavailable) {
			t.Errorf("%s %s with Redis down: %d %q %s; want 503 UNAVAILABLE with Retry-After", r.method, r.uri, a.status, a.retryAfter, a.body)
		}
	}
}
