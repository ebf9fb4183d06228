package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/shared/keys"
)

// Gate is a flash voucher's state in Redis, as its Lua scripts keep it.
type Gate struct {
	Loaded    bool              // the remaining key exists
	Remaining int64             // uses left
	Orders    map[string]string // orderId -> "reservedAtMillis:attempt:customerId"
	Users     map[string]string // customerId -> uses held
	// Definition is what the gate enforces of the voucher's definition: rev, total, perUser,
	// paused ("1" or "0"); empty when it holds none.
	Definition map[string]string
}

// ReadGate reads code's keys under prefix in one MULTI, so the three agree with each other
// (R1), and fails the test if Redis does not answer.
func ReadGate(t testing.TB, rdb redis.UniversalClient, prefix, code string) Gate {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k := keys.ForVoucher(prefix, code)
	var remaining *redis.StringCmd
	var orders, users, definition *redis.MapStringStringCmd
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		remaining = p.Get(ctx, k.Remaining)
		orders = p.HGetAll(ctx, k.Orders)
		users = p.HGetAll(ctx, k.Users)
		definition = p.HGetAll(ctx, k.Definition)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("read the gate of %s: %v", code, err)
	}
	var g Gate
	switch n, err := remaining.Int64(); {
	case errors.Is(err, redis.Nil):
	case err != nil:
		t.Fatalf("read the gate of %s: remaining: %v", code, err)
	default:
		g.Loaded, g.Remaining = true, n
	}
	g.Orders, g.Users, g.Definition = orders.Val(), users.Val(), definition.Val()
	return g
}
