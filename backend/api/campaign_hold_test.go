package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"vouchergate/backend/app"
	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// A voucher's holdTtl is how long its reservations are held: created with 90s, a hold expires
// 90s after its reservation; PATCHed to 5m, the next one 5m after; back to null, VG_HOLD_TTL
// (15m) after. A hold keeps the expiry it was given through the edits, and the expiry job, on a
// manual clock, releases each at its own expiry and not a microsecond before. Both paths.
func TestHoldTTLIsTheVouchersOwn(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		cfg := backendtest.Config(t)
		t0 := time.Now().Truncate(time.Second)
		clock := testkit.NewManualClock(t0)
		b := backendtest.Start(t, cfg, app.WithClock(clock))
		if st, body := b.Do(t, "POST", "/admin/vouchers", map[string]any{"code": "HOLDTTL", "discountAmount": 10,
			"totalLimit": 10, "perUserLimit": 1, "startsAt": t0.Add(-time.Minute), "endsAt": t0.Add(48 * time.Hour),
			"flashSale": flash, "holdTtl": "90s"}); st != 201 {
			t.Fatalf("create with holdTtl 90s: %d %s", st, body)
		}
		held := map[string]time.Duration{}
		for _, step := range []struct {
			holdTTL any // the PATCH before the order; "" for none
			order   string
			want    time.Duration
			view    string
		}{
			{"", "o-90s", 90 * time.Second, "1m30s"},
			{"5m", "o-5m", 5 * time.Minute, "5m0s"},
			{nil, "o-default", cfg.HoldTTL, cfg.HoldTTL.String()},
		} {
			if step.holdTTL != "" {
				mustEdit(t, b, "HOLDTTL", map[string]any{"holdTtl": step.holdTTL})
			}
			if v := viewOf(t, b, "HOLDTTL"); v.HoldTTL != step.view {
				t.Errorf("the voucher's holdTtl before %s: %q; want %q", step.order, v.HoldTTL, step.view)
			}
			if a := reserve(t, b, "HOLDTTL", "cust-"+step.order, step.order, 100); a.status != 201 {
				t.Fatalf("reserve %s: %+v", step.order, a)
			}
			held[step.order] = step.want
		}
		// read after every edit: each hold as it was given
		for _, r := range holdsOf(t, b, "HOLDTTL") {
			if got := r.HoldExpiresAt.Sub(r.ReservedAt); got != held[r.OrderID] || !r.ReservedAt.Equal(t0) {
				t.Errorf("%s reserved at %v, held %v; want at %v for %v", r.OrderID, r.ReservedAt, got, t0, held[r.OrderID])
			}
		}

		for _, expiry := range []struct {
			after time.Duration
			order string
		}{{90 * time.Second, "o-90s"}, {5 * time.Minute, "o-5m"}, {cfg.HoldTTL, "o-default"}} {
			clock.Set(t0.Add(expiry.after - time.Microsecond))
			if st, body := b.Do(t, "POST", "/admin/expire", nil); st != 200 || string(body) != `{"released":0}` {
				t.Errorf("expire a microsecond before %s's expiry: %d %s; want none released", expiry.order, st, body)
			}
			clock.Set(t0.Add(expiry.after))
			if st, body := b.Do(t, "POST", "/admin/expire", nil); st != 200 || string(body) != `{"released":1}` {
				t.Errorf("expire at %s's expiry: %d %s; want it released", expiry.order, st, body)
			}
			for _, r := range holdsOf(t, b, "HOLDTTL") {
				if r.OrderID == expiry.order && r.Status != wire.StatusReleased {
					t.Errorf("%s after its expiry: %s; want RELEASED", r.OrderID, r.Status)
				}
			}
		}
		b.CheckInvariants(t, "HOLDTTL", nil)
	})
}

// holdsOf reads the voucher's redemptions (one page).
func holdsOf(t *testing.T, b *backendtest.Backend, code string) []wire.Redemption {
	t.Helper()
	st, raw := b.Do(t, "GET", "/admin/vouchers/"+code+"/redemptions", nil)
	var page wire.RedemptionPage
	if st != 200 || json.Unmarshal(raw, &page) != nil {
		t.Fatalf("redemptions of %s: %d %s", code, st, raw)
	}
	return page.Redemptions
}
