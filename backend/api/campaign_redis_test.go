package api_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/events"
	"vouchergate/shared/keys"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// The warm-up and the reconciler agree with every edit. A flash voucher is reserved, released,
// confirmed, refunded and edited (limit, per-customer limit, pause); Redis is then killed and
// comes back empty. The warm-up loads it from the database with the edited definition: uses
// left = the edited limit minus the active rows, paused, the lowered per-customer limit.
// Every reconciliation (after each edit, after the warm-up, after the resume) finds the uses
// right: no drift, nothing put back, released or recounted. A gate that lost its definition,
// holds an older one, or one the database never committed is put right by the next
// reservation or reconciliation. An edit while Redis is down answers 503 and writes nothing.
func TestWarmupAndReconcileAgreeWithEdits(t *testing.T) {
	rs := testkit.StartRedis(t)
	cfg := backendtest.Config(t)
	cfg.RedisURL = rs.URL()
	cfg.RedisTimeout = 300 * time.Millisecond
	b := backendtest.Start(t, cfg)
	b.CreateVoucher(t, backendtest.Voucher{Code: "WARM", Discount: 10, TotalLimit: 50, PerUserLimit: 2, FlashSale: true})
	for _, o := range []string{"a1", "a2", "b1", "b2", "c1", "c2", "d1", "d2", "e1", "e2"} {
		if a := reserve(t, b, "WARM", "cust-"+o[:1], o, 100); a.status != 201 {
			t.Fatalf("reserve %s: %+v", o, a)
		}
	}
	b.Do(t, "DELETE", "/vouchers/WARM/reservations/a1", nil)
	b.Do(t, "DELETE", "/vouchers/WARM/reservations/b1", nil)
	for _, o := range []string{"c1", "c2", "d1"} {
		b.Do(t, "POST", "/vouchers/WARM/reservations/"+o+"/confirm", nil)
	}
	if st, _ := refund(t, b, "WARM", "d1"); st != 200 {
		t.Fatalf("refund d1: %d", st)
	}
	active := []string{"a2", "b2", "c1", "c2", "d2", "e1", "e2"}
	reconcileClean(t, b, "WARM", 50, len(active))
	// each edit leaves Redis as reconciliation would: nothing to put back, recount or release
	mustEdit(t, b, "WARM", map[string]any{"totalLimit": 30})
	reconcileClean(t, b, "WARM", 30, len(active))
	mustEdit(t, b, "WARM", map[string]any{"perUserLimit": 1, "discountAmount": 20})
	reconcileClean(t, b, "WARM", 30, len(active))
	mustEdit(t, b, "WARM", map[string]any{"active": false})
	reconcileClean(t, b, "WARM", 30, len(active))
	b.CheckInvariants(t, "WARM", active)

	rs.Kill()
	if st, _, code := edit(t, b, "WARM", map[string]any{"totalLimit": 40}); st != 503 || code != wire.CodeUnavailable {
		t.Errorf("an edit with Redis down: %d %s; want 503", st, code)
	}
	rs.RestartEmpty()
	var view wire.VoucherView
	testkit.Eventually(t, "warm-up answered once redis came back empty", func() bool {
		st, raw := b.Do(t, "POST", "/admin/vouchers/WARM/warmup", nil)
		return st == 200 && json.Unmarshal(raw, &view) == nil
	})
	if view.Revision != 4 || view.TotalLimit != 30 || view.RedisRemaining == nil || *view.RedisRemaining != 30-int64(len(active)) {
		t.Errorf("warm-up after the edits: revision %d, total %d, redis remaining %v; want 4, 30 and %d (the edit with Redis down wrote nothing)",
			view.Revision, view.TotalLimit, deref(view.RedisRemaining), 30-len(active))
	}
	b.CheckInvariants(t, "WARM", active) // the gate's definition: revision 4, 30, 1, paused
	reconcileClean(t, b, "WARM", 30, len(active))
	state := voucherState(t, b, "WARM")
	if !state.Paused || state.Holders == nil || !state.Holders.MayHold([]byte("a2")) {
		t.Errorf("the state after the warm-up: %+v; want paused with its holders", state)
	}
	if a := reserve(t, b, "WARM", "cust-f", "f1", 100); a.reason != wire.ReasonPaused {
		t.Errorf("a new order of the paused voucher after the warm-up: %+v", a)
	}
	mustEdit(t, b, "WARM", map[string]any{"active": true})
	reconcileClean(t, b, "WARM", 30, len(active))
	if a := reserve(t, b, "WARM", "cust-a", "a3", 100); a.code != wire.CodeAlreadyUsed {
		t.Errorf("cust-a, holding 1 of the lowered limit 1: %+v; want ALREADY_USED", a)
	}
	if a := reserve(t, b, "WARM", "cust-f", "f1", 100); a.status != 201 || a.discount != 20 {
		t.Errorf("a new customer after the warm-up: %+v; want 201 with the edited 20 off", a)
	}
	active = append(active, "f1")
	reconcileClean(t, b, "WARM", 30, len(active))

	// The gate loses its definition, or holds an older one: the next reservation gives it the
	// database's, and so does reconciliation.
	k := keys.ForVoucher(cfg.RedisPrefix, "WARM")
	ctx := context.Background()
	if err := b.App.Redis.Del(ctx, k.Definition).Err(); err != nil {
		t.Fatal(err)
	}
	if a := reserve(t, b, "WARM", "cust-g", "g1", 100); a.status != 201 {
		t.Errorf("a reservation with the gate's definition lost: %+v", a)
	}
	active = append(active, "g1")
	b.CheckInvariants(t, "WARM", active)
	if err := b.App.Redis.HSet(ctx, k.Definition, "rev", "1", "total", "50", "perUser", "2").Err(); err != nil {
		t.Fatal(err)
	}
	reconcileClean(t, b, "WARM", 30, len(active))
	b.CheckInvariants(t, "WARM", active)

	// A revision the database never committed (an edit whose commit failed after the gate took
	// it): reservations wait for a commit that never comes, then have the database's restored.
	if err := b.App.Redis.HSet(ctx, k.Definition, "rev", "99", "total", "1000").Err(); err != nil {
		t.Fatal(err)
	}
	if a := reserveAsClient(t, b, "WARM", "cust-h", "h1", 100); a.status != 201 {
		t.Errorf("a reservation with the gate ahead of the database: %+v", a)
	}
	active = append(active, "h1")
	b.CheckInvariants(t, "WARM", active)
	if err := b.App.Redis.HSet(ctx, k.Definition, "rev", "99", "total", "1000").Err(); err != nil {
		t.Fatal(err)
	}
	reconcileClean(t, b, "WARM", 30, len(active))
	b.CheckInvariants(t, "WARM", active)
}

// reconcileClean reconciles code and fails the test unless Redis already agreed with the
// database: total_limit total, that many less active uses left before and after, no drift, and
// nothing loaded, put back, released or recounted.
func reconcileClean(t *testing.T, b *backendtest.Backend, code string, total, active int) {
	t.Helper()
	st, raw := b.Do(t, "POST", "/admin/reconcile?code="+code, nil)
	var rep wire.Reconciliations
	if st != 200 || json.Unmarshal(raw, &rep) != nil || len(rep.Vouchers) != 1 {
		t.Fatalf("reconcile %s: %d %s", code, st, raw)
	}
	r := rep.Vouchers[0]
	left := int64(total - active)
	if r.TotalLimit != total || r.Expected != left || r.RemainingBefore != left || r.RemainingAfter != left || r.Drift != 0 ||
		r.Loaded || r.Recounted || len(r.PutBack) != 0 || len(r.Released) != 0 || r.InFlight != 0 {
		t.Errorf("reconcile %s: %+v; want total %d, %d left before and after, and nothing to repair", code, r, total, left)
	}
}

// voucherState reads GET /vouchers/{code}/state.
func voucherState(t *testing.T, b *backendtest.Backend, code string) events.VoucherState {
	t.Helper()
	st, raw := b.Do(t, "GET", "/vouchers/"+code+"/state", nil)
	s, err := events.DecodeVoucherState(raw)
	if st != 200 || err != nil {
		t.Fatalf("state of %s: %d %s: %v", code, st, raw, err)
	}
	return s
}
