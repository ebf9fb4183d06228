package quota_test

import (
	"context"
	"testing"
	"time"

	"vouchergate/backend/quota"
)

// Two shoppers, and a service, sending one idemKey string for one shared identity (a family's
// tablet, on a rolling window whose entries are named by idemKey) never meet: each deduct counts
// for its caller, a retry answers its own caller's first answer, and each rollback gives back
// only its own caller's.
func TestCallersIdemKeysNeverMeet(t *testing.T) {
	e := newEnv(t, time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	w := rolling(t, time.Hour)
	e.rule(t, 1, "DEVICE", "ITEM:1", 10, w)
	ctx := context.Background()
	tablet := item("DEVICE", "tablet", 1, "ITEM:1")
	alice, bob, service := e.svc.As("alice"), e.svc.As("bob"), e.svc.As("")

	for i, c := range []struct {
		name   string
		deduct func() error
	}{
		{"alice", func() error { _, err := alice.Deduct(ctx, 1, "k", []quota.Item{tablet}); return err }},
		{"bob", func() error {
			_, err := bob.Deduct(ctx, 1, "k", []quota.Item{item("DEVICE", "tablet", 2, "ITEM:1")})
			return err
		}},
		{"a service", func() error { _, err := service.Deduct(ctx, 1, "k", []quota.Item{tablet}); return err }},
	} {
		if err := c.deduct(); err != nil {
			t.Fatalf("%s's deduct %d: %v", c.name, i, err)
		}
	}
	if got := e.used(t, 1, "DEVICE", "tablet", "ITEM:1", w); got != 4 {
		t.Fatalf("the tablet after three callers' k: used %d; want 1 + 2 + 1", got)
	}
	// alice's retry answers her own deduct, not bob's (other items: that would be IDEMPOTENCY_KEY_REUSED)
	res, err := alice.Deduct(ctx, 1, "k", []quota.Item{tablet})
	if err != nil || res.IdemKey != "k" || len(res.Counters) != 1 || res.Counters[0].Used != 1 {
		t.Errorf("alice's retry: %+v, %v; want her first answer (used 1) under idemKey k", res, err)
	}
	rb, err := bob.Rollback(ctx, 1, "k")
	if err != nil || rb.IdemKey != "k" || len(rb.Returned) != 1 || rb.Returned[0].Amount != 2 {
		t.Fatalf("bob's rollback: %+v, %v; want his 2 given back", rb, err)
	}
	if got := e.used(t, 1, "DEVICE", "tablet", "ITEM:1", w); got != 2 {
		t.Errorf("the tablet after bob's rollback: used %d; want 2 (alice's and the service's)", got)
	}
	if rb, err := e.svc.As("carol").Rollback(ctx, 1, "k"); err != nil || len(rb.Returned) != 0 {
		t.Errorf("carol's rollback of k, which she never deducted: %+v, %v; want nothing given back", rb, err)
	}
	if rb, err := e.svc.Rollback(ctx, 1, "k"); err != nil || len(rb.Returned) != 1 || rb.Returned[0].Amount != 1 {
		t.Errorf("the service's rollback: %+v, %v; want its 1 given back", rb, err)
	}
	if got := e.used(t, 1, "DEVICE", "tablet", "ITEM:1", w); got != 1 {
		t.Errorf("the tablet after the service's rollback: used %d; want alice's 1", got)
	}
}
