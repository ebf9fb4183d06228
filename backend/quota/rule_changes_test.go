package quota_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"vouchergate/backend/quota"
	"vouchergate/testkit"
)

// waitRefused deducts on svc until the limit shows (a refusal), failing the test after
// testkit.WaitBound.
func waitRefused(t *testing.T, svc *quota.Service) {
	t.Helper()
	i := 0
	testkit.Eventually(t, "the rule applied by the other backend", func() bool {
		i++
		_, err := svc.Deduct(context.Background(), 1, fmt.Sprintf("probe-%d", i), []quota.Item{item("USER", "u", 1, "ITEM:1")})
		if err != nil && !errors.Is(err, quota.ErrQuotaExceeded) {
			t.Fatal(err)
		}
		return err != nil
	})
}

// A rule made on one backend is used by another running backend: told over NATS (the periodic
// refresh is an hour away), or by the periodic refresh when there is no NATS.
func TestRuleChangeSeenByOtherBackend(t *testing.T) {
	for _, viaNATS := range []bool{true, false} {
		t.Run(fmt.Sprintf("nats=%v", viaNATS), func(t *testing.T) {
			e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC))
			cfg := e.cfg
			if viaNATS {
				cfg.NATS = natsConn(t)
				cfg.RefreshEvery = time.Hour // only the message can tell it
				e.cfg.NATS = natsConn(t)
			} else {
				cfg.RefreshEvery = 300 * time.Millisecond
			}
			admin := e.start(t, e.cfg) // the backend an admin calls
			other := e.start(t, cfg)   // a backend already running
			// no rule yet: unlimited
			for i := range 3 {
				if _, err := other.Deduct(t.Context(), 1, fmt.Sprintf("free-%d", i), []quota.Item{item("USER", "u", 1, "ITEM:1")}); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := admin.PutRule(t.Context(), quota.Rule{BizID: 1, IdentityType: "USER", Dimension: "ITEM:1",
				Limit: 5, Window: calendar(t, quota.Day, "UTC")}); err != nil {
				t.Fatal(err)
			}
			waitRefused(t, other)
			// deleting it lifts the limit everywhere too
			rules, err := admin.Rules(t.Context(), 1)
			if err != nil || len(rules) != 1 {
				t.Fatalf("rules: %+v %v", rules, err)
			}
			if _, err := admin.DeleteRule(t.Context(), rules[0].ID); err != nil {
				t.Fatal(err)
			}
			i := 0
			testkit.Eventually(t, "the rule's deletion applied by the other backend", func() bool {
				i++
				_, err := other.Deduct(t.Context(), 1, fmt.Sprintf("after-%d", i), []quota.Item{item("USER", "u", 1, "ITEM:1")})
				if err != nil && !errors.Is(err, quota.ErrQuotaExceeded) {
					t.Fatalf("after delete: %v", err)
				}
				return err == nil
			})
		})
	}
}

// Putting a rule again for the same window changes its limit and keeps its counter.
func TestPutRuleUpdatesLimit(t *testing.T) {
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC))
	day := calendar(t, quota.Day, "UTC")
	r1, created, err := e.svc.PutRule(t.Context(), quota.Rule{BizID: 1, IdentityType: "USER", Dimension: "ITEM:1", Limit: 2, Window: day})
	if err != nil || !created {
		t.Fatalf("first put: created=%v %v", created, err)
	}
	if n := e.fill(t, 1, "USER", "u", "ITEM:1"); n != 2 {
		t.Fatalf("took %d; want 2", n)
	}
	r2, created, err := e.svc.PutRule(t.Context(), quota.Rule{BizID: 1, IdentityType: "USER", Dimension: "ITEM:1", Limit: 3, Window: day})
	if err != nil || created || r2.ID != r1.ID || r2.Limit != 3 {
		t.Fatalf("second put: %+v created=%v %v; want rule %d updated", r2, created, err, r1.ID)
	}
	if n := e.fill(t, 1, "USER", "u", "ITEM:1"); n != 1 {
		t.Fatalf("after raising the limit to 3 took %d; want 1", n)
	}
	got, err := e.svc.Rule(t.Context(), r1.ID)
	if err != nil || got.Limit != 3 || got.Window.ID() != day.ID() {
		t.Fatalf("rule: %+v %v", got, err)
	}
	if _, err := e.svc.Rule(t.Context(), r1.ID+100); !errors.Is(err, quota.ErrRuleNotFound) {
		t.Fatalf("unknown rule: %v", err)
	}
}

// A business line and identity type hold at most wire.MaxQuotaRulesPerType rules.
func TestTooManyRules(t *testing.T) {
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC))
	day := calendar(t, quota.Day, "UTC")
	for i := range 64 {
		e.rule(t, 1, "USER", fmt.Sprintf("ITEM:%d", i), 1, day)
	}
	_, _, err := e.svc.PutRule(t.Context(), quota.Rule{BizID: 1, IdentityType: "USER", Dimension: "ITEM:x", Limit: 1, Window: day})
	if !errors.Is(err, quota.ErrTooManyRules) {
		t.Fatalf("65th rule: %v; want ErrTooManyRules", err)
	}
	// updating one of the 64 is still allowed, and another identity type has its own 64
	e.rule(t, 1, "USER", "ITEM:0", 2, day)
	e.rule(t, 1, "DEVICE", "ITEM:x", 1, day)
}
