package api_test

import (
	"strings"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// On a Redis whose CONFIG is disabled (rename-command CONFIG "", as managed Redis services run
// it) the backend cannot read maxmemory-policy: it starts and is ready, and says so in /readyz
// and vouchergate_quota_redis_eviction_unknown, without VG_QUOTA_EVICTION=allow.
func TestReadyzReportsAnUnreadableEvictionPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own Redis")
	}
	srv := testkit.StartRedis(t, testkit.RedisArgs("--rename-command", "CONFIG", ""))
	cfg := backendtest.Config(t)
	cfg.RedisURL = srv.URL()
	b, _ := startQuotas(t, t0, &cfg)
	a := do(t, b, "GET", "/readyz", "")
	if a.status != 200 || !strings.Contains(string(a.body), `"redis_eviction":"not required: redis maxmemory-policy cannot be read: `+srv.Addr()) ||
		!strings.Contains(string(a.body), "noeviction") {
		t.Fatalf("CONFIG disabled: %d %s; want ready, the unread policy reported with the node and what to check", a.status, a.body)
	}
	scraped := testkit.ScrapeMetrics(t, b.OpsURL+"/metrics")
	if v := scraped.Value(t, "vouchergate_quota_redis_eviction_unknown"); v != 1 {
		t.Fatalf("vouchergate_quota_redis_eviction_unknown %v; want 1", v)
	}
	if v := scraped.Value(t, "vouchergate_quota_redis_may_evict"); v != 0 {
		t.Fatalf("vouchergate_quota_redis_may_evict %v; want 0", v)
	}
	if a := do(t, b, "POST", "/admin/quota-rules", dayRule); a.status != 201 {
		t.Fatalf("rule: %d %s", a.status, a.body)
	}
	if a := do(t, b, "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"u","dimensions":["ITEM:1001"]}]}`); a.status != 200 {
		t.Fatalf("a deduct: %d %s", a.status, a.body)
	}
}
