package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/api"
	"vouchergate/backend/app"
	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// The admin routes of overrides, resets and settings over HTTP, with the deducts they change:
// a VIP's override and a block answer at once on the backend that took them and within a second
// on another; a shadow rule's would-be refusal is in the deduct's answer; usage without a
// dimension lists the wildcard's counters; a reset empties them and is listed. Admin routes
// take the admin token only.
func TestQuotaAdminRoutes(t *testing.T) {
	b, clock := startQuotas(t, t0, nil)
	other := backendtest.Start(t, b.Config, app.WithClock(clock)) // a second backend on the same stores and NATS subjects
	deduct := func(on *backendtest.Backend, key, who string, amount int) reply {
		return do(t, on, "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"`+key+`","items":[{"identityType":"USER","identity":"`+who+
			`","dimensions":["ITEM:1001"],"amount":`+itoa(amount)+`}]}`)
	}
	for _, r := range []string{
		`{"bizId":1,"identityType":"USER","dimension":"ITEM:*","limit":3,"window":{"type":"DAY","timezone":"Asia/Shanghai"}}`,
		`{"bizId":1,"identityType":"USER","dimension":"*","limit":4,"window":{"type":"DAY","timezone":"Asia/Shanghai"},"mode":"SHADOW"}`,
	} {
		if a := do(t, b, "POST", "/admin/quota-rules", r); a.status != 201 {
			t.Fatalf("rule: %d %s", a.status, a.body)
		}
	}
	put := do(t, b, "POST", "/admin/quota-overrides", `{"bizId":1,"identityType":"USER","identity":"vip","dimension":"ITEM:*",`+
		`"window":{"type":"DAY","timezone":"Asia/Shanghai"},"limit":10}`)
	var ov wire.QuotaOverride
	put.decode(t, &ov)
	if put.status != 201 || ov.Limit != 10 || ov.RuleID == 0 {
		t.Fatalf("put override: %d %s", put.status, put.body)
	}
	if a := do(t, b, "POST", "/admin/quota-overrides", `{"bizId":1,"identityType":"USER","identity":"fraud","dimension":"ITEM:*",`+
		`"window":{"type":"DAY","timezone":"Asia/Shanghai"},"limit":0}`); a.status != 201 {
		t.Fatalf("put block: %d %s", a.status, a.body)
	}
	// applied by the other backend within a second (NATS)
	testkit.EventuallyWithin(t, time.Second, "the override and the block on the other backend", func() bool {
		var u wire.QuotaUsageResponse
		do(t, other, "GET", "/quotas/usage?bizId=1&identityType=USER&identity=vip&dimension=ITEM:1001", "").decode(t, &u)
		var c wire.QuotaCheckResponse
		do(t, other, "POST", "/quotas/check", `{"bizId":1,"idemKey":"probe","items":[{"identityType":"USER","identity":"fraud","dimensions":["ITEM:1001"]}]}`).decode(t, &c)
		return len(u.Counters) == 2 && u.Counters[0].Limit == 10 && !c.Pass && c.Error == wire.CodeQuotaExceeded
	})
	if a := deduct(other, "v-1", "vip", 5); a.status != 200 {
		t.Fatalf("the VIP's 5 on the other backend: %d %s", a.status, a.body)
	}
	if a := deduct(other, "f-1", "fraud", 1); a.status != 409 || !strings.Contains(string(a.body), `"limit":0`) {
		t.Fatalf("the blocked identity: %d %s", a.status, a.body)
	}
	// the shadow "*" of 4 would refuse the VIP's next 5 items, and says so
	a := deduct(b, "v-2", "vip", 1)
	var res wire.QuotaDeductResponse
	a.decode(t, &res)
	if a.status != 200 || len(res.WouldExceed) != 1 || res.WouldExceed[0].Counter.Limit != 4 || res.WouldExceed[0].Counter.Used != 6 ||
		!res.WouldExceed[0].Counter.Shadow {
		t.Fatalf("past the shadow rule: %d %s; want 200 listing it in wouldExceed", a.status, a.body)
	}
	if a := do(t, b, "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"v-3","items":[{"identityType":"USER","identity":"vip","dimensions":["ITEM:1002"]}]}`); a.status != 200 {
		t.Fatalf("a deduct of another item: %d %s", a.status, a.body)
	}
	var u wire.QuotaUsageResponse
	do(t, b, "GET", "/quotas/usage?bizId=1&identityType=USER&identity=vip", "").decode(t, &u)
	used := map[string]int64{}
	for _, c := range u.Counters {
		used[c.Dimension] = c.Used
	}
	if want := map[string]int64{"ITEM:1001": 6, "ITEM:1002": 1, "*": 7}; fmt.Sprint(used) != fmt.Sprint(want) {
		t.Fatalf("usage without a dimension: %+v; want the wildcard's ITEM:1001 and ITEM:1002, and the shadow * (%v)", u, want)
	}
	var listed wire.QuotaOverrides
	if a := do(t, b, "GET", "/admin/quota-overrides?bizId=1&identity=vip", ""); a.status != 200 {
		t.Fatalf("list overrides: %d %s", a.status, a.body)
	} else if a.decode(t, &listed); len(listed.Overrides) != 1 || listed.Overrides[0].ID != ov.ID {
		t.Fatalf("list overrides: %s", a.body)
	}

	// a reset of the VIP's counters
	a = do(t, b, "POST", "/admin/quota-counters/reset", `{"bizId":1,"identityType":"USER","identity":"vip"}`)
	var reset wire.QuotaReset
	a.decode(t, &reset)
	if a.status != 200 || reset.Outcome != "DONE" || len(reset.Cleared) != 3 {
		t.Fatalf("reset: %d %s; want ITEM:1001's 6, ITEM:1002's 1 and *'s 7 cleared", a.status, a.body)
	}
	do(t, b, "GET", "/quotas/usage?bizId=1&identityType=USER&identity=vip&dimension=ITEM:1001", "").decode(t, &u)
	if len(u.Counters) != 2 || u.Counters[0].Used != 0 || u.Counters[1].Used != 0 {
		t.Fatalf("after the reset: %+v", u)
	}
	var resets wire.QuotaResets
	do(t, b, "GET", "/admin/quota-counters/resets?bizId=1&identityType=USER&identity=vip", "").decode(t, &resets)
	if len(resets.Resets) != 1 || resets.Resets[0].ID != reset.ID || len(resets.Resets[0].Cleared) != 3 {
		t.Fatalf("resets: %+v", resets)
	}

	// settings, and the override deleted
	if a := do(t, b, "POST", "/admin/quota-settings", `{"bizId":1,"whenUnavailable":"OPEN"}`); a.status != 200 || !strings.Contains(string(a.body), `"OPEN"`) {
		t.Fatalf("put setting: %d %s", a.status, a.body)
	}
	var settings wire.QuotaSettings
	do(t, b, "GET", "/admin/quota-settings", "").decode(t, &settings)
	if len(settings.Settings) != 1 || settings.Settings[0].WhenUnavailable != "OPEN" {
		t.Fatalf("settings: %+v", settings)
	}
	if a := do(t, b, "DELETE", "/admin/quota-overrides/"+itoa(int(ov.ID)), ""); a.status != 200 {
		t.Fatalf("delete override: %d %s", a.status, a.body)
	}
	if a := do(t, b, "GET", "/admin/quota-overrides/"+itoa(int(ov.ID)), ""); a.status != 404 {
		t.Fatalf("deleted override: %d %s", a.status, a.body)
	}
	// the admin token only
	for _, path := range []string{"/admin/quota-overrides", "/admin/quota-counters/resets?bizId=1", "/admin/quota-settings"} {
		if st, _ := b.DoWithHeader(t, "GET", path, "Authorization", "Bearer not-the-token"); st != 401 {
			t.Errorf("GET %s with another token: %d; want 401", path, st)
		}
	}
}

// A shopper's partial rollback acts on its own idemKeys only, and names only its own
// identities: another shopper's deduct of the same idemKey is never touched, and an item of
// another identity is a 403 that changes nothing.
func TestShopperPartialRollback(t *testing.T) {
	b, _ := startWithKeys(t, testKeys...)
	if st, body := b.Do(t, "POST", "/admin/quota-rules", dayRule); st != 201 {
		t.Fatalf("rule: %d %s", st, body)
	}
	as := func(who string) map[string]string {
		return map[string]string{"X-API-Key": secretEdge, api.SubjectHeader: who}
	}
	call := func(path, body string, h map[string]string) (int, string) {
		st, got, _ := b.DoWithHeaders(t, "POST", path, body, h)
		return st, string(got)
	}
	deduct := func(who string) string {
		return `{"bizId":1,"idemKey":"order-1","items":[{"identityType":"USER","identity":"` + who + `","dimensions":["ITEM:1001"],"amount":2}]}`
	}
	partial := func(who string) string {
		return `{"bizId":1,"idemKey":"order-1","rollbackKey":"refund","items":[{"identityType":"USER","identity":"` + who + `","dimensions":["ITEM:1001"],"amount":1}]}`
	}
	for _, who := range []string{"alice", "bob"} {
		if st, body := call("/quotas/deduct", deduct(who), as(who)); st != 200 {
			t.Fatalf("%s's deduct: %d %s", who, st, body)
		}
	}
	if st, body := call("/quotas/rollback", partial("alice"), as("bob")); st != 403 || !strings.Contains(body, "FORBIDDEN") {
		t.Fatalf("bob naming alice's identity: %d %s; want 403", st, body)
	}
	if st, body := call("/quotas/rollback", partial("carol"), as("carol")); st != 200 || body != `{"idemKey":"order-1","rollbackKey":"refund","returned":[]}` {
		t.Fatalf("carol, who deducted nothing under order-1: %d %s; want nothing given back", st, body)
	}
	if st, body := call("/quotas/rollback", partial("alice"), as("alice")); st != 200 || !strings.Contains(body, `"amount":1`) {
		t.Fatalf("alice's own: %d %s", st, body)
	}
	for who, want := range map[string]int64{"alice": 1, "bob": 2} {
		st, body, _ := b.DoWithHeaders(t, "GET", "/quotas/usage?bizId=1&identityType=USER&identity="+who+"&dimension=ITEM:1001", nil,
			map[string]string{"X-API-Key": secretQuota})
		var u wire.QuotaUsageResponse
		if err := json.Unmarshal(body, &u); st != 200 || err != nil || len(u.Counters) != 1 || u.Counters[0].Used != want {
			t.Errorf("%s's counter: %d %s; want %d", who, st, body, want)
		}
	}
}

// /readyz reports a Redis whose maxmemory-policy may evict quota keys, by name: not ready by
// default, reported only with VG_QUOTA_EVICTION=allow; and the backend does not start on one
// unless allowed.
func TestReadyzReportsEvictionPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own Redis")
	}
	srv := testkit.StartRedis(t)
	cfg := backendtest.Config(t)
	cfg.RedisURL = srv.URL()
	b, _ := startQuotas(t, t0, &cfg)
	if a := do(t, b, "GET", "/readyz", ""); a.status != 200 || !strings.Contains(string(a.body), `"redis_eviction":"ok"`) {
		t.Fatalf("noeviction: %d %s", a.status, a.body)
	}
	own := redis.NewClient(&redis.Options{Addr: srv.Addr()}) // srv's alone: the shared Redis is not touched
	t.Cleanup(func() { own.Close() })
	if err := own.ConfigSet(t.Context(), "maxmemory-policy", "volatile-ttl").Err(); err != nil {
		t.Fatal(err)
	}
	a := do(t, b, "GET", "/readyz", "")
	if a.status != 503 || !strings.Contains(string(a.body), "volatile-ttl") || !strings.Contains(string(a.body), "VG_QUOTA_EVICTION") {
		t.Fatalf("volatile-ttl: %d %s; want 503 naming the policy and the setting", a.status, a.body)
	}
	scraped := testkit.ScrapeMetrics(t, b.OpsURL+"/metrics")
	if v := scraped.Value(t, "vouchergate_quota_redis_may_evict"); v != 1 {
		t.Fatalf("vouchergate_quota_redis_may_evict %v; want 1", v)
	}
	allowed := cfg
	allowed.RedisPrefix = testkit.RedisPrefix(t)
	allowed.QuotaEviction = "allow"
	ab, _ := startQuotas(t, t0, &allowed)
	if a := do(t, ab, "GET", "/readyz", ""); a.status != 200 || !strings.Contains(string(a.body), `"redis_eviction":"not required: `) {
		t.Fatalf("allowed: %d %s; want ready, the policy reported", a.status, a.body)
	}
}
