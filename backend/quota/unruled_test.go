package quota_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"vouchergate/backend/quota"
)

// A deduct or check that no rule covers (a bizId typed wrong) limits nothing: it is answered
// with Unruled and counted by business line, or refused with ErrNoRules when the service is so
// configured; one a rule covers is neither.
func TestUnruledDeductsAreSeen(t *testing.T) {
	e := newEnv(t, time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	e.rule(t, 1, "USER", "ITEM:1", 3, calendar(t, quota.Day, "UTC"))
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	cfg := e.cfg
	cfg.Metrics = reg
	svc := e.start(t, cfg)
	unruled := func(biz string) float64 {
		t.Helper()
		var total float64
		n, _ := testutil.GatherAndCount(reg, "vouchergate_quota_unruled_total")
		if n == 0 {
			return 0
		}
		families, _ := reg.Gather()
		for _, f := range families {
			if f.GetName() != "vouchergate_quota_unruled_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == biz {
					total += m.GetCounter().GetValue()
				}
			}
		}
		return total
	}
	items := []quota.Item{item("USER", "u-1", 1, "ITEM:1")}

	res, err := svc.Deduct(ctx, 11, "typo-1", items) // bizId 11: no rule
	if err != nil || !res.Unruled || len(res.Counters) != 0 {
		t.Fatalf("a deduct of a bizId without rules: %+v, %v; want passed, unruled, no counters", res, err)
	}
	if res, err := svc.Check(ctx, 11, "typo-2", items); err != nil || !res.Unruled {
		t.Fatalf("its check: %+v, %v; want passed and unruled", res, err)
	}
	if res, err := svc.Deduct(ctx, 1, "real-1", []quota.Item{item("DEVICE", "d-1", 1, "ITEM:1")}); err != nil || !res.Unruled {
		t.Fatalf("a deduct of an identity type without rules: %+v, %v; want unruled", res, err)
	}
	if res, err := svc.Deduct(ctx, 1, "real-2", items); err != nil || res.Unruled || len(res.Counters) != 1 {
		t.Fatalf("a deduct a rule covers: %+v, %v; want one counter, not unruled", res, err)
	}
	if got, want := unruled("11"), 2.0; got != want {
		t.Errorf("unruled calls of bizId 11: %v; want %v", got, want)
	}
	if got := unruled("1"); got != 1 {
		t.Errorf("unruled calls of bizId 1: %v; want 1 (the DEVICE deduct)", got)
	}

	cfg.RefuseUnruled, cfg.Metrics = true, nil
	strict := e.start(t, cfg)
	if _, err := strict.Deduct(ctx, 11, "typo-3", items); !errors.Is(err, quota.ErrNoRules) {
		t.Errorf("with RefuseUnruled, a deduct of a bizId without rules: %v; want ErrNoRules", err)
	}
	if _, err := strict.Deduct(ctx, 1, "real-3", items); err != nil {
		t.Errorf("with RefuseUnruled, a deduct a rule covers: %v", err)
	}
}
