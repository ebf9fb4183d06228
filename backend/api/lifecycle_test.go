package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

func statusOf(t *testing.T, b *backendtest.Backend, method, path string) (int, string) {
	t.Helper()
	status, body := b.Do(t, method, path, nil)
	var e wire.Error
	_ = json.Unmarshal(body, &e)
	return status, e.Error
}

// Release, reserve again by the same customer; confirm and release are idempotent; confirm
// after release and release after confirm are refused with their own codes.
func TestReservationLifecycle(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		b.CreateVoucher(t, backendtest.Voucher{Code: "LIFE", Discount: 50, TotalLimit: 2, FlashSale: flash})
		expect := func(method, path string, wantStatus int, wantCode string) {
			t.Helper()
			if status, code := statusOf(t, b, method, path); status != wantStatus || code != wantCode {
				t.Errorf("%s %s: %d %q; want %d %q", method, path, status, code, wantStatus, wantCode)
			}
		}
		mustReserve := func(customer, order string, wantStatus int) {
			t.Helper()
			if a := reserve(t, b, "LIFE", customer, order, 80); a.status != wantStatus {
				t.Errorf("reserve %s for %s: %+v; want %d", order, customer, a, wantStatus)
			}
		}

		mustReserve("alice", "a1", 201)
		mustReserve("alice", "a2", 409) // one per customer
		expect("DELETE", "/vouchers/LIFE/reservations/a1", 200, "")
		expect("DELETE", "/vouchers/LIFE/reservations/a1", 200, "") // idempotent
		expect("POST", "/vouchers/LIFE/reservations/a1/confirm", 409, wire.CodeReservationReleased)
		if a := reserve(t, b, "LIFE", "alice", "a1", 80); a.status != 409 || a.code != wire.CodeReservationReleased {
			t.Errorf("reserve a released order again: %+v; want 409 %s", a, wire.CodeReservationReleased)
		}
		mustReserve("alice", "a2", 201) // the released use and slot are hers again
		expect("POST", "/vouchers/LIFE/reservations/a2/confirm", 200, "")
		expect("POST", "/vouchers/LIFE/reservations/a2/confirm", 200, "") // idempotent
		expect("DELETE", "/vouchers/LIFE/reservations/a2", 409, wire.CodeReservationConfirmed)
		mustReserve("alice", "a2", 201) // a retry of a confirmed order keeps its grant

		expect("POST", "/vouchers/LIFE/reservations/nope/confirm", 404, wire.CodeReservationNotFound)
		expect("DELETE", "/vouchers/LIFE/reservations/nope", 404, wire.CodeReservationNotFound)
		expect("DELETE", "/vouchers/NOSUCH/reservations/a2", 404, wire.CodeVoucherNotFound)
		expect("POST", "/vouchers/NOSUCH/reservations/a2/confirm", 404, wire.CodeVoucherNotFound)
		if a := reserve(t, b, "NOSUCH", "bob", "b1", 80); a.status != 404 || a.code != wire.CodeVoucherNotFound {
			t.Errorf("reserve unknown voucher: %+v", a)
		}
		// the orderId of another voucher's redemption is not this voucher's
		expect("DELETE", "/vouchers/LIFE/reservations/a1", 200, "")

		mustReserve("bob", "b1", 201)
		mustReserve("carol", "c1", 409) // two uses: alice's a2 and bob's b1
		b.CheckInvariants(t, "LIFE", []string{"a2", "b1"})
		st, body := b.Do(t, "GET", "/admin/vouchers/LIFE", nil)
		var v wire.VoucherView
		if err := json.Unmarshal(body, &v); st != 200 || err != nil {
			t.Fatalf("admin get: %d %s", st, body)
		}
		if v.UsedCount != 2 || v.Counts["CONFIRMED"] != 1 || v.Counts["RESERVED"] != 1 || v.Counts["RELEASED"] != 1 {
			t.Errorf("admin view %+v", v)
		}
		if flash && (v.RedisRemaining == nil || *v.RedisRemaining != 0) {
			t.Errorf("flash voucher redisRemaining %v; want 0", v.RedisRemaining)
		}
	})
}

// Eligibility is checked before a use is taken, and a refusal says why: before the start
// (NOT_STARTED), after the end (ENDED), below the minimum amount (ORDER_TOO_SMALL), paused
// (PAUSED, whatever else is wrong); the dry run answers the same reason. Nothing is taken.
func TestNotEligible(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		now := time.Now()
		b.CreateVoucher(t, backendtest.Voucher{Code: "LATER", Discount: 5, TotalLimit: 5, FlashSale: flash,
			StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour)})
		b.CreateVoucher(t, backendtest.Voucher{Code: "OVER", Discount: 5, TotalLimit: 5, FlashSale: flash,
			StartsAt: now.Add(-2 * time.Hour), EndsAt: now.Add(-time.Hour)})
		b.CreateVoucher(t, backendtest.Voucher{Code: "MIN", Discount: 5, TotalLimit: 5, FlashSale: flash, MinOrderAmount: 100})
		b.CreateVoucher(t, backendtest.Voucher{Code: "HALT", Discount: 5, TotalLimit: 5, FlashSale: flash, MinOrderAmount: 100,
			StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour)})
		mustEdit(t, b, "HALT", map[string]any{"active": false})
		for _, c := range []struct {
			code   string
			amount int64
			reason string
		}{
			{"LATER", 500, wire.ReasonNotStarted}, {"OVER", 500, wire.ReasonEnded}, {"MIN", 99, wire.ReasonOrderTooSmall},
			{"HALT", 99, wire.ReasonPaused},
		} {
			want := answer{status: 422, code: wire.CodeNotEligible, reason: c.reason}
			if a := validate(t, b, c.code, "dan", "d-"+c.code, c.amount); a != want {
				t.Errorf("validate %s amount %d: %+v; want %+v", c.code, c.amount, a, want)
			}
			if a := reserve(t, b, c.code, "dan", "d-"+c.code, c.amount); a != want {
				t.Errorf("reserve %s amount %d: %+v; want %+v", c.code, c.amount, a, want)
			}
			b.CheckInvariants(t, c.code, nil)
		}
		if a := reserve(t, b, "MIN", "dan", "d-ok", 100); a.status != 201 || a.discount != 5 {
			t.Errorf("MIN at the minimum: %+v; want 201 with 5 off", a)
		}
		if a := reserve(t, b, "MIN", "erin", "e-ok", 100); a.status != 201 {
			t.Errorf("MIN for another customer: %+v", a)
		}
		// an edit moves the reasons: the period opened, the minimum lowered
		mustEdit(t, b, "LATER", map[string]any{"startsAt": now.Add(-time.Minute)})
		mustEdit(t, b, "MIN", map[string]any{"minOrderAmount": 50})
		mustEdit(t, b, "OVER", map[string]any{"endsAt": now.Add(time.Hour)})
		for _, code := range []string{"LATER", "MIN", "OVER"} {
			if a := reserve(t, b, code, "fay", "f-"+code, 60); a.status != 201 {
				t.Errorf("%s after its edit: %+v; want 201", code, a)
			}
		}
	})
}
