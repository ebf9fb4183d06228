package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest"
	"vouchergate/backend/backendtest/history"
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

// With VG_QUOTA_DURABILITY=replicated, a deduct whose replica does not acknowledge it within
// VG_QUOTA_WAIT_TIMEOUT answers 503 UNAVAILABLE with Retry-After through the API: its script
// ran on the master (its record is there) and only the replica's acknowledgement is missing
// (the master's link to it cut by loopback iptables). Once the replica is back the client's
// retry with the same idemKey answers 200, counted once. The deducts' history is checked
// against the quota model.
func TestQuotaDeductNotReplicatedIs503(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis master and its replica")
	}
	master := testkit.StartRedis(t)
	replica := testkit.StartRedis(t, testkit.RedisReplicaOf(master.Addr()))
	cfg := backendtest.Config(t)
	cfg.RedisURL = master.URL()
	// a second for the replica to acknowledge: time enough on a loaded machine (100 ms was not);
	// a cut replica never does
	cfg.QuotaDurability, cfg.QuotaMinReplicas, cfg.QuotaWaitTimeout = "replicated", 1, time.Second
	cfg.RedisTimeout = 2 * time.Second // the wait must be shorter
	b, _ := startQuotas(t, t0, &cfg)
	if st, body := b.Do(t, "POST", "/admin/quota-rules", dayRule); st != 201 {
		t.Fatalf("rule: %d %s", st, body)
	}
	rec := history.For(t)
	deduct := func(key string) (int, []byte, string) {
		return deductRecorded(t, rec, b, wire.QuotaDeductRequest{BizID: 1, IdemKey: key,
			Items: []wire.QuotaItem{{IdentityType: "USER", Identity: "u1", Dimensions: []string{"ITEM:1001"}}}})
	}
	if st, body, _ := deduct("k-0"); st != 200 {
		t.Fatalf("deduct with the replica up: %d %s", st, body)
	}

	restore := testkit.CutReplication(t, master.Addr())
	st, body, retryAfter := deduct("k-1")
	if st != 503 || retryAfter == "" || !strings.Contains(string(body), wire.CodeUnavailable) {
		t.Errorf("deduct with the replica cut off: %d %q %s; want 503 UNAVAILABLE with Retry-After", st, retryAfter, body)
	}
	recorded := func(addr string) bool {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		ks, err := testkit.RedisKeys(context.Background(), rdb, cfg.RedisPrefix)
		if err != nil {
			t.Fatalf("read the keys of %s: %v", addr, err)
		}
		for k := range ks {
			if strings.HasSuffix(k, ":i:k-1") {
				return true
			}
		}
		return false
	}
	if !recorded(master.Addr()) || recorded(replica.Addr()) {
		t.Errorf("k-1's record on the master: %v, on the replica: %v; want only on the master (the 503 is the wait's, not Redis down)",
			recorded(master.Addr()), recorded(replica.Addr()))
	}
	restore()

	var used int64
	testkit.Eventually(t, "the retry of k-1 answered 200 once the replica is back", func() bool {
		st, body, _ := deduct("k-1")
		var res wire.QuotaDeductResponse
		if st != 200 || json.Unmarshal(body, &res) != nil || len(res.Counters) != 1 {
			return false
		}
		used = res.Counters[0].Used
		return true
	})
	if used != 2 {
		t.Errorf("after k-0 and k-1's retry u1 is at %d; want 2 (k-1 counted once)", used)
	}
}
