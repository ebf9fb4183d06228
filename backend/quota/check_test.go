package quota_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/quota"
	"vouchergate/testkit"
)

// Check answers what the Deduct after it answers, on a single Redis and on a cluster (its
// script touches one identity's hash-tagged keys), for requests of several identities, and
// leaves every key as it was.
func TestCheckAgreesWithDeduct(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
		e.rule(t, 1, "USER", "ITEM:1001", 3, calendar(t, quota.Day, "Asia/Shanghai"))
		e.rule(t, 1, "DEVICE", "*", 4, rolling(t, time.Hour))
		e.rule(t, 1, "PHONE", "ITEM:*", 5, calendar(t, quota.Week, "Asia/Shanghai"))
		req := func(user, device, phone int64) []quota.Item {
			return []quota.Item{item("USER", "u1", user, "ITEM:1001"), item("DEVICE", "d1", device, "ITEM:1001"),
				item("PHONE", "+100", phone, "ITEM:1001")}
		}
		steps := []struct {
			key   string
			items []quota.Item
			want  error
		}{
			{"k1", req(1, 2, 3), nil},
			{"k1", req(1, 2, 3), nil}, // a replay
			{"k1", req(1, 1, 3), quota.ErrIdemKeyReused},
			{"k2", req(1, 3, 1), quota.ErrQuotaExceeded}, // the device, the second identity, is full
			{"k3", req(2, 2, 2), nil},
			{"k4", req(1, 1, 1), quota.ErrQuotaExceeded}, // the user is full
		}
		for _, s := range steps {
			before := e.dump(t)
			got, err := e.svc.Check(context.Background(), 1, s.key, s.items)
			if changed := testkit.RedisChanges(before, e.dump(t)); len(changed) > 0 {
				t.Fatalf("check %s changed redis: %v", s.key, changed)
			}
			if !errors.Is(err, s.want) {
				t.Fatalf("check %s: %v; want %v", s.key, err, s.want)
			}
			res, derr := e.deduct(1, s.key, s.items...)
			if !errors.Is(derr, s.want) || !reflect.DeepEqual(got, res) {
				t.Fatalf("deduct %s after check: %+v %v; check said %+v %v", s.key, res, derr, got, err)
			}
			var cex, dex *quota.ExceededError
			if errors.As(err, &cex) && (!errors.As(derr, &dex) || !reflect.DeepEqual(cex, dex)) {
				t.Fatalf("deduct %s refused %v; check said %v", s.key, derr, err)
			}
		}
	})
}

// dump reads every key under the service's prefix.
func (e *env) dump(t testing.TB) map[string]testkit.RedisKey {
	t.Helper()
	keys, err := testkit.RedisKeys(context.Background(), e.rdb, e.cfg.KeyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
