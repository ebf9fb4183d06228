package quotaapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"vouchergate/backend/quota"
	"vouchergate/backend/quotaapi"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// With Redis down, the quota endpoints answer 503 UNAVAILABLE with Retry-After, never 500.
func TestRedisDownIs503(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a Redis")
	}
	srv := testkit.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	pool, err := pgxpool.New(context.Background(), testkit.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	migrate(t, pool)
	svc, err := quota.New(context.Background(), quota.Config{Redis: rdb, DB: pool, KeyPrefix: "t:", NATSPrefix: testkit.NATSPrefix()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	c := client(t, quotaapi.New(svc, quotaapi.Options{}))
	if a := do(t, c, "POST", "/admin/quota-rules", `{"bizId":1,"identityType":"USER","dimension":"*","limit":5,"window":{"type":"DAY","timezone":"UTC"}}`); a.status != 201 {
		t.Fatalf("rule: %d %s", a.status, a.body)
	}
	srv.Kill()
	for _, r := range []struct{ method, uri, body string }{
		{"POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"u","dimensions":["ITEM:1"]}]}`},
		{"POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k"}`},
		{"GET", "/quotas/usage?bizId=1&identityType=USER&identity=u", ""},
	} {
		a := do(t, c, r.method, r.uri, r.body)
		if a.status != 503 || a.retryAfter == "" || !strings.Contains(string(a.body), wire.CodeUnavailable) {
			t.Errorf("%s %s with Redis down: %d %q %s; want 503 UNAVAILABLE with Retry-After", r.method, r.uri, a.status, a.retryAfter, a.body)
		}
	}
}
