package voucher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"vouchergate/backend/voucher"
)

// A flash sale's progress (vouchergate_voucher_uses_left) follows the sale as it goes, not
// only at the next reconciliation: each take sets what Redis has left, a refusal for lack of
// uses sets 0, a release gives one back, and a reconciliation sets what it recounted.
func TestUsesLeftFollowsTheSale(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, voucher.Config{Metrics: reg}, nil)
	ctx := context.Background()
	v := e.createFlash(t, "PROGRESS", 3, 1)
	usesLeft := func() float64 {
		t.Helper()
		n, err := testutil.GatherAndCount(reg, "vouchergate_voucher_uses_left")
		if err != nil || n != 1 {
			t.Fatalf("uses left: %d series, %v; want one", n, err)
		}
		families, _ := reg.Gather()
		for _, f := range families {
			if f.GetName() == "vouchergate_voucher_uses_left" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	reserve := func(order string) error {
		_, err := e.svc.Reserve(ctx, voucher.Request{Code: v.Code, CustomerID: "c-" + order, OrderID: order, OrderAmount: 100})
		return err
	}

	for i, order := range []string{"o1", "o2", "o3"} {
		if err := reserve(order); err != nil {
			t.Fatalf("reserve %s: %v", order, err)
		}
		if got, want := usesLeft(), float64(2-i); got != want {
			t.Fatalf("after %d taken: uses left %v; want %v", i+1, got, want)
		}
	}
	if err := reserve("o4"); !errors.Is(err, voucher.ErrOutOfStock) {
		t.Fatalf("a fourth order: %v; want out of stock", err)
	}
	if got := usesLeft(); got != 0 {
		t.Fatalf("sold out: uses left %v; want 0", got)
	}
	if _, err := e.svc.Release(ctx, v.Code, "o2"); err != nil {
		t.Fatalf("release o2: %v", err)
	}
	if got := usesLeft(); got != 1 {
		t.Fatalf("after a release: uses left %v; want 1", got)
	}
	if err := e.rdb.Set(ctx, e.keys(v.Code).Remaining, 0, 0).Err(); err != nil { // Redis drifted
		t.Fatal(err)
	}
	if _, err := e.svc.Reconcile(ctx, v.Code, voucher.ReconcileConfig{Grace: time.Minute}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if got := usesLeft(); got != 1 {
		t.Fatalf("after reconciliation recounted: uses left %v; want 1", got)
	}
}

// A flash voucher's limit (vouchergate_voucher_total_limit) is shown from its creation, as an
// edit leaves it, and no more once it is deleted: a dashboard's picker and sold share read it.
func TestTotalLimitShownFromCreation(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, voucher.Config{Metrics: reg}, nil)
	ctx := context.Background()
	limit := func() (float64, int) {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "vouchergate_voucher_total_limit" {
				return f.GetMetric()[0].GetGauge().GetValue(), len(f.GetMetric())
			}
		}
		return -1, 0
	}
	v := voucher.Voucher{Code: "SHOWN", DiscountAmount: 10, TotalLimit: 3, PerUserLimit: 1,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(24 * time.Hour), FlashSale: true}
	if err := e.svc.Create(ctx, v); err != nil {
		t.Fatalf("create: %v", err)
	}
	if got, n := limit(); got != 3 || n != 1 {
		t.Fatalf("after creation: total_limit %v (%d series); want 3, before any reconciliation", got, n)
	}
	raised := 5
	if _, err := e.svc.Edit(ctx, v.Code, voucher.Edit{TotalLimit: &raised}); err != nil {
		t.Fatalf("raise the limit: %v", err)
	}
	if got, _ := limit(); got != 5 {
		t.Fatalf("after the edit: total_limit %v; want 5", got)
	}
	if err := e.svc.Delete(ctx, v.Code); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, n := limit(); n != 0 {
		t.Fatalf("after the delete: %d series; want none", n)
	}
}

// With two backends, a flash voucher deleted or edited through one leaves or changes the other's
// vouchergate_voucher_total_limit and uses_left at the other's next reconciliation (it hears of
// neither otherwise); the vouchers still there keep their series.
func TestAnotherBackendsDeleteLeavesAtReconciliation(t *testing.T) {
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	e := newEnv(t, voucher.Config{Metrics: regA}, nil)
	other := voucher.NewService(e.store, e.gate, &recorder{}, voucher.Config{Metrics: regB, Clock: e.clock})
	ctx := context.Background()
	reconcileOther := func() {
		t.Helper()
		if _, err := other.ReconcileAll(ctx, voucher.ReconcileConfig{Grace: time.Minute}); err != nil {
			t.Fatalf("reconcile on the other backend: %v", err)
		}
	}
	gone := e.createFlash(t, "GONE", 3, 1)
	e.createFlash(t, "STAYS", 4, 1)
	reconcileOther()
	if got := gauges(t, regB, "vouchergate_voucher_total_limit"); got["GONE"] != 3 || got["STAYS"] != 4 {
		t.Fatalf("the other backend after a reconciliation: total_limit %v; want GONE 3, STAYS 4", got)
	}

	raised := 5
	if _, err := e.svc.Edit(ctx, gone.Code, voucher.Edit{TotalLimit: &raised}); err != nil {
		t.Fatalf("raise the limit: %v", err)
	}
	reconcileOther()
	if got := gauges(t, regB, "vouchergate_voucher_total_limit"); got["GONE"] != 5 {
		t.Fatalf("the other backend reconciled after the edit: total_limit %v; want GONE 5", got)
	}

	if err := e.svc.Delete(ctx, gone.Code); err != nil {
		t.Fatalf("delete: %v", err)
	}
	reconcileOther()
	for _, name := range []string{"vouchergate_voucher_total_limit", "vouchergate_voucher_uses_left"} {
		if got := gauges(t, regB, name); len(got) != 1 || got["STAYS"] == 0 {
			t.Errorf("the other backend reconciled after the delete: %s %v; want STAYS only", name, got)
		}
	}
}

// gauges returns a gauge family's values by code.
func gauges(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}
