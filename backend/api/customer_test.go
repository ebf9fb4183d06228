package api_test

import (
	"context"
	"fmt"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

// reserveRaw sends a reservation whose customerId is the JSON text customer (a number or a
// quoted string), as the seed's clients send it.
func reserveRaw(t *testing.T, b *backendtest.Backend, code, customer, order string) answer {
	t.Helper()
	status, body := b.Do(t, "POST", "/vouchers/"+code+"/reservations",
		fmt.Sprintf(`{"customerId":%s,"orderId":%q,"orderAmount":1000}`, customer, order))
	return decodeAnswer(t, status, body, order)
}

// A numeric customerId works on both paths, and 42 and "42" are one customer: they share the
// per-customer limit and a retry in the other form gets the same 201. "042" is another customer.
func TestNumericCustomerID(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		b.CreateVoucher(t, backendtest.Voucher{Code: "SEED", Discount: 100, TotalLimit: 10, PerUserLimit: 2, FlashSale: flash})
		granted := []string{"n-1", "n-2", "n-4", "n-5"}
		steps := []struct {
			customer, order string
			want            answer
		}{
			{`42`, "n-1", answer{status: 201, discount: 100}},
			{`"42"`, "n-2", answer{status: 201, discount: 100}},
			{`42`, "n-3", answer{status: 409, code: wire.CodeAlreadyUsed}},   // 42 is at its limit of 2
			{`"42"`, "n-3", answer{status: 409, code: wire.CodeAlreadyUsed}}, // whichever form
			{`"42"`, "n-1", answer{status: 201, discount: 100}},              // the retry in the other form
			{`42`, "n-2", answer{status: 201, discount: 100}},
			{`43`, "n-1", answer{status: 409, code: wire.CodeAlreadyUsed}}, // n-1 is 42's order
			{`"042"`, "n-4", answer{status: 201, discount: 100}},           // a string id, not 42
			{`9223372036854775807`, "n-5", answer{status: 201, discount: 100}},
		}
		for _, s := range steps {
			if got := reserveRaw(t, b, "SEED", s.customer, s.order); got != s.want {
				t.Errorf("customerId %s order %s: %+v; want %+v", s.customer, s.order, got, s.want)
			}
		}
		b.CheckInvariants(t, "SEED", granted)

		rows, err := b.App.Pool.Query(context.Background(),
			`SELECT order_id, customer_id FROM redemptions WHERE voucher_code = 'SEED' ORDER BY order_id`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for rows.Next() {
			var order, customer string
			if err := rows.Scan(&order, &customer); err != nil {
				t.Fatal(err)
			}
			got[order] = customer
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		want := map[string]string{"n-1": "42", "n-2": "42", "n-4": "042", "n-5": "9223372036854775807"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("redemptions by order: %v; want %v", got, want)
		}
	})
}
