package api_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/app"
	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// degradedBound is how long a degraded answer takes over HTTP during the breaker's backoff, at
// the median, when no deduct of the OPEN business line tries Redis: a local answer, with room
// for -race on a loaded machine; degradedMax bounds each, so that a moment the machine stalls
// fails no run, while an answer that waited on Redis (VG_REDIS_TIMEOUT) still would.
const (
	degradedBound = 50 * time.Millisecond
	degradedMax   = time.Second
)

// Degrading open over HTTP on two backends: business line 1 is set whenUnavailable OPEN through
// the admin API of backend A, and deducts go to backend B, which learns it over NATS (its
// vouchergate_quota_degraded_total{biz_id="1"} shows at 0 as the setting loads). With Redis
// stopped, B answers business line 1's deducts 200 "degraded": true with no counters, each
// within degradedBound at the median during the backoff, and counts each in the metric by business line;
// business line 2, left CLOSED, gets 503, and so does a rollback (which cannot tell a degraded
// deduct from a counted one). Redis keeps its data on disk (append-only, fsync always), so once
// it is back the counters show what was counted before the outage, and the degraded deducts
// added nothing to them.
func TestDegradeOpenOverHTTPOnTwoBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a Redis")
	}
	srv := testkit.StartRedis(t, testkit.RedisPersistent())
	cfg := backendtest.Config(t)
	cfg.RedisURL = srv.URL()
	a, clock := startQuotas(t, t0, &cfg)
	b := backendtest.Start(t, a.Config, app.WithClock(clock))
	for _, biz := range []string{"1", "2"} {
		if r := do(t, a, "POST", "/admin/quota-rules", strings.Replace(dayRule, `"bizId":1`, `"bizId":`+biz, 1)); r.status != 201 {
			t.Fatalf("rule of bizId %s: %d %s", biz, r.status, r.body)
		}
	}
	if r := do(t, a, "POST", "/admin/quota-settings", `{"bizId":1,"whenUnavailable":"OPEN"}`); r.status != 200 {
		t.Fatalf("setting on backend A: %d %s", r.status, r.body)
	}
	degraded := func(on *backendtest.Backend, biz string) (float64, bool) {
		m := testkit.ScrapeMetrics(t, on.OpsURL+"/metrics")
		return m.Count(t, "vouchergate_quota_degraded_total", "biz_id", biz), m.Has("vouchergate_quota_degraded_total", "biz_id", biz)
	}
	testkit.EventuallyWithin(t, time.Second, "backend B showing business line 1's degraded answers at 0 (the OPEN setting loaded)", func() bool {
		n, shown := degraded(b, "1")
		return shown && n == 0
	})
	deduct := func(biz, key string) reply {
		return do(t, b, "POST", "/quotas/deduct", `{"bizId":`+biz+`,"idemKey":"`+key+`","items":[{"identityType":"USER","identity":"u","dimensions":["ITEM:1001"]}]}`)
	}
	for _, biz := range []string{"1", "2"} {
		if r := deduct(biz, "before"); r.status != 200 || strings.Contains(string(r.body), "degraded") {
			t.Fatalf("bizId %s's deduct with Redis up: %d %s", biz, r.status, r.body)
		}
	}

	srv.Stop()
	const n = 20
	var took []time.Duration
	for i := range n {
		start := time.Now()
		r := deduct("1", fmt.Sprintf("down-%d", i))
		if i > 0 { // the first tried Redis and opened the breaker; the others answer in its backoff
			took = append(took, time.Since(start))
		}
		var res wire.QuotaDeductResponse
		r.decode(t, &res)
		if r.status != 200 || !res.Degraded || len(res.Counters) != 0 {
			t.Fatalf("OPEN deduct %d with Redis stopped: %d %s; want 200 degraded, nothing counted", i, r.status, r.body)
		}
	}
	slices.Sort(took)
	median, slowest := took[len(took)/2], took[len(took)-1]
	t.Logf("%d degraded answers in the backoff: median %v, slowest %v", len(took), median, slowest)
	if median > degradedBound || slowest > degradedMax {
		t.Errorf("degraded answers in the backoff: median %v, slowest %v; want within %v and %v", median, slowest, degradedBound, degradedMax)
	}
	if r := deduct("2", "down-0"); r.status != 503 || !strings.Contains(string(r.body), wire.CodeUnavailable) {
		t.Fatalf("CLOSED deduct with Redis stopped: %d %s; want 503 UNAVAILABLE", r.status, r.body)
	}
	if r := do(t, b, "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"down-0"}`); r.status != 503 {
		t.Fatalf("rollback of an OPEN line's deduct with Redis stopped: %d %s; want 503 (it cannot tell a degraded deduct)", r.status, r.body)
	}
	if got, _ := degraded(b, "1"); got != n {
		t.Errorf("backend B's vouchergate_quota_degraded_total{biz_id=\"1\"} %v; want %d", got, n)
	}
	if got, shown := degraded(b, "2"); shown || got != 0 {
		t.Errorf("backend B's vouchergate_quota_degraded_total{biz_id=\"2\"} %v (shown %v); a CLOSED line answers nothing degraded", got, shown)
	}
	if got, shown := degraded(a, "1"); !shown || got != 0 {
		t.Errorf("backend A's vouchergate_quota_degraded_total{biz_id=\"1\"} %v (shown %v); want 0: it answered no deduct", got, shown)
	}

	srv.Start() // with its append-only file: what was counted before is back
	usage := func(biz string) int64 {
		var u wire.QuotaUsageResponse
		do(t, b, "GET", "/quotas/usage?bizId="+biz+"&identityType=USER&identity=u&dimension=ITEM:1001", "").decode(t, &u)
		if len(u.Counters) != 1 {
			t.Fatalf("usage of bizId %s: %+v", biz, u)
		}
		return u.Counters[0].Used
	}
	for _, biz := range []string{"1", "2"} {
		if got := usage(biz); got != 1 {
			t.Fatalf("bizId %s's counter at %d after Redis came back; want the 1 counted before the outage", biz, got)
		}
	}
	clock.Advance(2 * time.Second) // past the backoff (VG_QUOTA_DEGRADE_BACKOFF 1s)
	testkit.Eventually(t, "backend B counting business line 1's deducts again", func() bool {
		r := deduct("1", "after")
		return r.status == 200 && !strings.Contains(string(r.body), "degraded")
	})
	if got := usage("1"); got != 2 {
		t.Fatalf("bizId 1's counter at %d; want the deduct before the outage and the one after", got)
	}
	if r := do(t, b, "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"down-0"}`); r.status != 200 || !strings.Contains(string(r.body), `"returned":[]`) {
		t.Fatalf("rollback of a degraded deduct once Redis is back: %d %s; want nothing given back", r.status, r.body)
	}
}
