package api_test

import (
	"encoding/json"
	"net/url"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

// go test -fuzz=FuzzReserveRequest ./backend/api: whatever the path's code and the body, a
// real backend answers JSON and never a 5xx.
func FuzzReserveRequest(f *testing.F) {
	b := backendtest.Start(f, backendtest.Config(f))
	b.CreateVoucher(f, backendtest.Voucher{Code: "FUZZ", Discount: 1, TotalLimit: 1_000_000, PerUserLimit: 1000, FlashSale: true})
	b.CreateVoucher(f, backendtest.Voucher{Code: "FUZZN", Discount: 1, TotalLimit: 1_000_000, PerUserLimit: 1000})
	f.Add("FUZZ", []byte(`{"customerId":"c","orderId":"o","orderAmount":5}`))
	f.Add("FUZZN", []byte(`{"customerId":"c","orderId":"o2","orderAmount":5}`))
	f.Add("FUZZ", []byte(`{"customerId":"c","orderId":"o","orderAmount":5}{}`))
	f.Add("fuzz", []byte(`{}`))
	f.Add("%2F..", []byte(`{"customerId":"c","orderId":"\ud800","orderAmount":5}`))
	f.Fuzz(func(t *testing.T, code string, body []byte) {
		status, resp := b.Do(t, "POST", "/vouchers/"+url.PathEscape(code)+"/reservations", body)
		if status >= 500 {
			t.Fatalf("code %q body %q: %d %s", code, body, status, resp)
		}
		if status != 201 {
			var e wire.Error
			if err := json.Unmarshal(resp, &e); err != nil || e.Error == "" {
				t.Fatalf("code %q body %q: %d with a non-JSON error %q", code, body, status, resp)
			}
		}
	})
}
