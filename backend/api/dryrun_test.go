package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/keys"
	"vouchergate/shared/wire"
)

// validate sends a reservation's dry run and reads it as the reservation's answer it predicts:
// valid is a 201 with the discount; not valid is the refusal code, with the reservation's status.
func validate(t *testing.T, b *backendtest.Backend, code, customer, order string, amount int64) answer {
	t.Helper()
	status, body := b.Do(t, "POST", "/vouchers/"+code+"/validate",
		map[string]any{"customerId": customer, "orderId": order, "orderAmount": amount})
	if status != 200 {
		return decodeAnswer(t, status, body, order)
	}
	var v wire.ValidateResponse
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("validate %s: %s: %v", order, body, err)
	}
	switch {
	case v.Valid && v.DiscountAmount != nil && v.Error == "":
		return answer{status: 201, discount: *v.DiscountAmount}
	case !v.Valid && v.DiscountAmount == nil && v.Error == wire.CodeNotEligible:
		return answer{status: 422, code: v.Error, reason: v.Reason}
	case !v.Valid && v.DiscountAmount == nil && v.Error != "":
		return answer{status: 409, code: v.Error}
	}
	t.Fatalf("validate %s: malformed answer %s", order, body)
	return answer{}
}

// validateChangesNothing validates, checks that neither store changed, then reserves and checks
// the reservation answered what the dry run said.
func validateChangesNothing(t *testing.T, b *backendtest.Backend, code, customer, order string, amount int64, want answer) {
	t.Helper()
	before := b.Snapshot(t)
	got := validate(t, b, code, customer, order, amount)
	if changes := b.Snapshot(t).Changes(before); len(changes) > 0 {
		t.Errorf("validate %s/%s changed the stores: %v", code, order, changes)
	}
	if got != want {
		t.Errorf("validate %s/%s for %s: %+v; want %+v", code, order, customer, got, want)
	}
	if r := reserve(t, b, code, customer, order, amount); r != got {
		t.Errorf("reserve %s/%s for %s after validate: %+v; validate said %+v", code, order, customer, r, got)
	}
}

// A dry run changes neither store and predicts the reservation that follows, for every answer
// a reservation has, on both paths.
func TestValidateChangesNothingAndAgreesWithReserve(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		b.CreateVoucher(t, backendtest.Voucher{Code: "TWO", Discount: 100, MinOrderAmount: 50, TotalLimit: 2, FlashSale: flash})
		seesWrites(t, b, flash)
		granted := answer{status: 201, discount: 100}
		steps := []struct {
			name            string
			customer, order string
			amount          int64
			want            answer
		}{
			{"grant", "c1", "o1", 500, granted},
			{"a granted order again", "c1", "o1", 500, granted},
			{"customer at the limit", "c1", "o2", 500, answer{status: 409, code: wire.CodeAlreadyUsed}},
			{"order of another customer", "c2", "o1", 500, answer{status: 409, code: wire.CodeAlreadyUsed}},
			{"below the minimum", "c3", "o3", 40, answer{status: 422, code: wire.CodeNotEligible, reason: wire.ReasonOrderTooSmall}},
			{"discount at most the amount", "c2", "o2", 60, answer{status: 201, discount: 60}},
			{"sold out", "c3", "o3", 500, answer{status: 409, code: wire.CodeOutOfStock}},
			{"unknown voucher", "c3", "o3", 500, answer{status: 404, code: wire.CodeVoucherNotFound}},
		}
		for _, s := range steps {
			code := "TWO"
			if s.want.code == wire.CodeVoucherNotFound {
				code = "NOPE"
			}
			t.Run(s.name, func(t *testing.T) { validateChangesNothing(t, b, code, s.customer, s.order, s.amount, s.want) })
		}
		if status, body := b.Do(t, "DELETE", "/vouchers/TWO/reservations/o2", nil); status != 200 {
			t.Fatalf("release o2: %d %s", status, body)
		}
		t.Run("released order", func(t *testing.T) {
			validateChangesNothing(t, b, "TWO", "c2", "o2", 500, answer{status: 409, code: wire.CodeReservationReleased})
		})
		t.Run("a use back after a release", func(t *testing.T) {
			validateChangesNothing(t, b, "TWO", "c4", "o4", 500, granted)
		})
		if flash {
			// Redis lost the voucher: the dry run answers from the database and loads nothing;
			// the reservation then loads it and answers the same.
			k := keys.ForVoucher(b.Config.RedisPrefix, "TWO")
			b.App.Redis.Del(context.Background(), k.Remaining, k.Users, k.Orders)
			t.Run("not in redis: sold out", func(t *testing.T) {
				validateChangesNothing(t, b, "TWO", "c5", "o5", 500, answer{status: 409, code: wire.CodeOutOfStock})
			})
			b.App.Redis.Del(context.Background(), k.Remaining, k.Users, k.Orders)
			t.Run("not in redis: a granted order", func(t *testing.T) {
				validateChangesNothing(t, b, "TWO", "c1", "o1", 500, granted)
			})
		}
		b.CheckInvariants(t, "TWO", []string{"o1", "o4"})
	})
}

// A few hundred dry runs during a sale (flash and normal), through the same backend as its reservations,
// change no outcome: the invariants hold, exactly the uses are sold, and every granted order's
// retry gets its grant again.
func TestValidatesDuringASaleKeepTheInvariants(t *testing.T) {
	forBothPaths(t, validatesDuringASale)
}

func validatesDuringASale(t *testing.T, flash bool) {
	b := backendtest.Start(t, backendtest.Config(t))
	v := backendtest.Voucher{Code: "SALE", Discount: 10, TotalLimit: 20, FlashSale: flash}
	b.CreateVoucher(t, v)
	recordSale(t, v, b)
	const reservations, validates = 100, 300
	results := make([]answer, reservations)
	checks := make([]answer, validates)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range reservations {
		wg.Go(func() {
			<-start
			results[i] = reserveAsClient(t, b, "SALE", fmt.Sprintf("c%d", i), fmt.Sprintf("o%d", i), 100)
		})
	}
	for i := range validates {
		wg.Go(func() {
			<-start
			n := i % reservations // the dry runs ask about the reservations' own orders
			checks[i] = validate(t, b, "SALE", fmt.Sprintf("c%d", n), fmt.Sprintf("o%d", n), 100)
		})
	}
	close(start)
	wg.Wait()

	var granted []string
	for i, a := range results {
		switch {
		case a.status == 201 && a.discount == 10:
			granted = append(granted, fmt.Sprintf("o%d", i))
		case a.status == 409 && a.code == wire.CodeOutOfStock:
		default:
			t.Errorf("reserve o%d: %+v", i, a)
		}
	}
	for i, a := range checks {
		if !(a.status == 201 && a.discount == 10) && !(a.status == 409 && a.code == wire.CodeOutOfStock) {
			t.Errorf("validate o%d: %+v", i%reservations, a)
		}
	}
	if len(granted) != 20 {
		t.Errorf("%d granted; want all 20 uses sold", len(granted))
	}
	b.CheckInvariants(t, "SALE", granted)
	for _, o := range granted {
		c := "c" + o[1:]
		if a := validate(t, b, "SALE", c, o, 100); a.status != 201 || a.discount != 10 {
			t.Errorf("validate granted %s after the sale: %+v", o, a)
		}
		if a := reserve(t, b, "SALE", c, o, 100); a.status != 201 || a.discount != 10 {
			t.Errorf("retry of granted %s: %+v", o, a)
		}
	}
	b.CheckInvariants(t, "SALE", granted)
}

// seesWrites checks that a snapshot sees what a reservation writes: a row, and for a flash
// voucher its Redis keys, so that "no change" means something.
func seesWrites(t *testing.T, b *backendtest.Backend, flash bool) {
	t.Helper()
	b.CreateVoucher(t, backendtest.Voucher{Code: "SEEN", Discount: 1, TotalLimit: 1, FlashSale: flash})
	before := b.Snapshot(t)
	if a := reserve(t, b, "SEEN", "s", "seen-1", 10); a.status != 201 {
		t.Fatalf("reserve: %+v", a)
	}
	tables, redisKeys := 0, 0
	for _, c := range b.Snapshot(t).Changes(before) {
		if strings.HasPrefix(c, "table ") {
			tables++
		} else {
			redisKeys++
		}
	}
	if tables == 0 || flash && redisKeys == 0 {
		t.Fatalf("a reservation changed %d tables and %d redis keys in the snapshot; want both seen", tables, redisKeys)
	}
}
