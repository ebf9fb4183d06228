package quota_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/quota"
	"vouchergate/testkit"
)

// takes deducts one ITEM:1 at a time for identity on svc until refused, and returns how many
// it took (at most 20).
func takes(t *testing.T, svc *quota.Service, identity, prefix string) int {
	t.Helper()
	for i := range 20 {
		_, err := svc.Deduct(t.Context(), 1, fmt.Sprintf("%s-%s-%d", prefix, identity, i), []quota.Item{item("USER", identity, 1, "ITEM:1")})
		if errors.Is(err, quota.ErrQuotaExceeded) {
			return i
		} else if err != nil {
			t.Fatal(err)
		}
	}
	return 20
}

// An override made on one backend replaces the rule's limit for that identity alone on every
// backend: the other, which reloads its rules only when NATS tells it (its refresh is an hour
// away), applies a raised limit and a block within a second of the change. An override that
// expires, or is deleted, gives the identity the rule's limit again; deleting the rule deletes
// its overrides. An override names an existing rule.
func TestOverridesOnTwoBackends(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
		e.cfg.NATS = natsConn(t)
		admin := e.start(t, e.cfg)
		cfg := e.cfg
		cfg.NATS, cfg.RefreshEvery = natsConn(t), time.Hour
		other := e.start(t, cfg)
		day := calendar(t, quota.Day, "UTC")
		rule, _, err := admin.PutRule(t.Context(), quota.Rule{BizID: 1, IdentityType: "USER", Dimension: "ITEM:*", Limit: 3, Window: day})
		if err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "the rule on the other backend", func() bool { return other.Metrics().Rules == 1 })

		vip, created, err := admin.PutOverride(t.Context(), quota.Override{BizID: 1, IdentityType: "USER", Identity: "vip",
			Dimension: "ITEM:*", Window: day, Limit: 10})
		if err != nil || !created || vip.RuleID != rule.ID || vip.Limit != 10 {
			t.Fatalf("put the VIP's override: %+v %v", vip, err)
		}
		// the bound: the NATS path applies a change everywhere within a second
		testkit.EventuallyWithin(t, time.Second, "the VIP's override on the other backend", func() bool {
			cs, err := other.Usage(t.Context(), 1, "USER", "vip", []string{"ITEM:1"})
			return err == nil && len(cs) == 1 && cs[0].Limit == 10
		})
		if n := takes(t, other, "vip", "a"); n != 10 {
			t.Fatalf("the VIP took %d on the other backend; want the override's 10", n)
		}
		if n := takes(t, other, "plain", "a"); n != 3 {
			t.Fatalf("another identity took %d; want the rule's 3", n)
		}

		// a block, expiring in an hour
		until := e.clock.Now().Add(time.Hour)
		block, _, err := admin.PutOverride(t.Context(), quota.Override{BizID: 1, IdentityType: "USER", Identity: "fraud",
			Dimension: "ITEM:*", Window: day, Limit: 0, ExpiresAt: &until})
		if err != nil {
			t.Fatal(err)
		}
		testkit.EventuallyWithin(t, time.Second, "the block on the other backend", func() bool {
			_, err := other.Check(t.Context(), 1, "probe-fraud", []quota.Item{item("USER", "fraud", 1, "ITEM:1")})
			return errors.Is(err, quota.ErrQuotaExceeded)
		})
		var ex *quota.ExceededError
		if _, err := other.Deduct(t.Context(), 1, "fraud-1", []quota.Item{item("USER", "fraud", 1, "ITEM:2")}); !errors.As(err, &ex) || ex.Counter.Limit != 0 {
			t.Fatalf("a blocked identity: %v; want refused at limit 0", err)
		}
		list, err := admin.Overrides(t.Context(), 1, "USER", "")
		if err != nil || len(list) != 2 || list[1].ID != block.ID || list[1].ExpiresAt == nil || !list[1].ExpiresAt.Equal(until) {
			t.Fatalf("overrides: %+v %v; want the VIP's and the block", list, err)
		}
		e.clock.Advance(time.Hour)
		if n := takes(t, other, "fraud", "b"); n != 3 {
			t.Fatalf("after the block expired the identity took %d; want the rule's 3", n)
		}
		if list, _ := admin.Overrides(t.Context(), 1, "", ""); len(list) != 1 {
			t.Fatalf("an expired override is still listed: %+v", list)
		}

		// deleted: the rule's limit again, everywhere within a second
		if _, err := admin.DeleteOverride(t.Context(), vip.ID); err != nil {
			t.Fatal(err)
		}
		testkit.EventuallyWithin(t, time.Second, "the VIP's override gone on the other backend", func() bool {
			cs, err := other.Usage(t.Context(), 1, "USER", "vip", []string{"ITEM:1"})
			return err == nil && len(cs) == 1 && cs[0].Limit == 3
		})
		if _, err := admin.DeleteOverride(t.Context(), vip.ID); !errors.Is(err, quota.ErrOverrideNotFound) {
			t.Fatalf("deleted twice: %v", err)
		}
		if _, _, err := admin.PutOverride(t.Context(), quota.Override{BizID: 1, IdentityType: "USER", Identity: "x",
			Dimension: "ITEM:1", Window: day, Limit: 5}); !errors.Is(err, quota.ErrNoRuleToOverride) {
			t.Fatalf("an override of no rule: %v; want ErrNoRuleToOverride", err)
		}
		again, _, err := admin.PutOverride(t.Context(), quota.Override{BizID: 1, IdentityType: "USER", Identity: "vip",
			Dimension: "ITEM:*", Window: day, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.DeleteRule(t.Context(), rule.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.OverrideByID(t.Context(), again.ID); !errors.Is(err, quota.ErrOverrideNotFound) {
			t.Fatalf("the rule's override after the rule was deleted: %v", err)
		}
	})
}

// Overrides are checked before they are stored.
func TestOverrideValidation(t *testing.T) {
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC))
	day := calendar(t, quota.Day, "UTC")
	past := e.clock.Now().Add(-time.Second)
	for name, o := range map[string]quota.Override{
		"no bizId":        {IdentityType: "USER", Identity: "u", Dimension: "ITEM:1", Window: day},
		"bad type":        {BizID: 1, IdentityType: "user", Identity: "u", Dimension: "ITEM:1", Window: day},
		"no identity":     {BizID: 1, IdentityType: "USER", Dimension: "ITEM:1", Window: day},
		"brace":           {BizID: 1, IdentityType: "USER", Identity: "u{1}", Dimension: "ITEM:1", Window: day},
		"bad dimension":   {BizID: 1, IdentityType: "USER", Identity: "u", Dimension: "ITEM", Window: day},
		"negative limit":  {BizID: 1, IdentityType: "USER", Identity: "u", Dimension: "ITEM:1", Window: day, Limit: -1},
		"no window":       {BizID: 1, IdentityType: "USER", Identity: "u", Dimension: "ITEM:1"},
		"expired already": {BizID: 1, IdentityType: "USER", Identity: "u", Dimension: "ITEM:1", Window: day, ExpiresAt: &past},
	} {
		if _, _, err := e.svc.PutOverride(t.Context(), o); !errors.Is(err, quota.ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
	}
}
