package api

import (
	"testing"

	"vouchergate/shared/wire"
)

// go test -fuzz=FuzzDecodeReserve ./backend/api: decoding never panics, and what it accepts is
// a valid reservation.
func FuzzDecodeReserve(f *testing.F) {
	for _, s := range []string{
		`{"customerId":"c1","orderId":"o1","orderAmount":100}`,
		`{"customerId":"c1","orderId":"o1","orderAmount":-1}`,
		`{"customerId":1,"orderId":"o1","orderAmount":100}`,
		`{"customerId":"c1","orderId":"o/1","orderAmount":100}`,
		`{"customerId":"\u0000","orderId":"o1","orderAmount":1e400}`,
		`[]`, `null`, ``, `{`, `{"orderAmount":9223372036854775808}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeReserve(body)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("refused without a message")
			}
			return
		}
		if wire.CheckID("customerId", string(req.CustomerID), wire.MaxCustomerLen) != nil ||
			wire.CheckID("orderId", req.OrderID, wire.MaxOrderIDLen) != nil ||
			req.OrderAmount == nil || *req.OrderAmount < 0 {
			t.Fatalf("accepted an invalid reservation %+v from %q", req, body)
		}
	})
}

// go test -fuzz=FuzzDecodeVoucherSpec ./backend/api
func FuzzDecodeVoucherSpec(f *testing.F) {
	f.Add([]byte(`{"code":"A","discountAmount":1,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"code":"a","discountAmount":1,"totalLimit":-1,"perUserLimit":0,"startsAt":"x","endsAt":""}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := decodeVoucherSpec(body)
		if err != nil {
			return
		}
		if !wire.ValidCode(v.Code) || *v.DiscountAmount < 0 || *v.TotalLimit < 0 || *v.PerUserLimit < 1 ||
			!v.endsAt.After(v.startsAt) {
			t.Fatalf("accepted an invalid voucher %+v from %q", v, body)
		}
	})
}
