package api_test

import (
	"encoding/json"
	"net/url"
	"strings"
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

// go test -fuzz=FuzzValidateRequest ./backend/api: whatever the code and the body, a real
// backend's dry run answers what the reservation sent next answers: the same 400 (message
// included) or 404, valid with the discount of its 201, or not valid with its refusal's code.
func FuzzValidateRequest(f *testing.F) {
	b := backendtest.Start(f, backendtest.Config(f))
	b.CreateVoucher(f, backendtest.Voucher{Code: "FUZZ", Discount: 7, MinOrderAmount: 3, TotalLimit: 2, PerUserLimit: 1, FlashSale: true})
	b.CreateVoucher(f, backendtest.Voucher{Code: "FUZZN", Discount: 7, MinOrderAmount: 3, TotalLimit: 2, PerUserLimit: 1})
	for _, code := range []string{"FUZZ", "FUZZN"} {
		for _, body := range []string{
			`{"customerId":"c","orderId":"o-` + code + `","orderAmount":5}`,
			`{"customerId":"c","orderId":"o-` + code + `","orderAmount":5}`,
			`{"customerId":"c","orderId":"p-` + code + `","orderAmount":5}`,
			`{"customerId":"d","orderId":"o-` + code + `","orderAmount":5}`,
			`{"customerId":"e","orderId":"q-` + code + `","orderAmount":2}`,
			`{"customerId":"e","orderId":"q-` + code + `","orderAmount":5}`,
			`{"customerId":"f","orderId":"r-` + code + `","orderAmount":5}`,
			`{"customerId":"f","orderId":"r-` + code + `"}`,
			`{"customerId":4.5,"orderId":"s","orderAmount":5}`,
		} {
			f.Add(code, []byte(body))
		}
	}
	f.Add("NOPE", []byte(`{"customerId":"c","orderId":"o","orderAmount":5}`))
	f.Fuzz(func(t *testing.T, code string, body []byte) {
		path := "/vouchers/" + url.PathEscape(code)
		vs, vb := b.Do(t, "POST", path+"/validate", body)
		rs, rb := b.Do(t, "POST", path+"/reservations", body)
		if vs >= 500 || rs >= 500 {
			t.Fatalf("code %q body %q: validate %d %s, reserve %d %s", code, body, vs, vb, rs, rb)
		}
		if vs != 200 {
			// the same answer; a message naming the path names its own
			if vs != rs || strings.ReplaceAll(string(vb), "/validate", "/reservations") != string(rb) {
				t.Fatalf("code %q body %q: validate %d %s, reserve %d %s; want the same", code, body, vs, vb, rs, rb)
			}
			return
		}
		var v wire.ValidateResponse
		if err := json.Unmarshal(vb, &v); err != nil {
			t.Fatalf("validate %d %s: %v", vs, vb, err)
		}
		if v.Valid {
			var r wire.ReserveResponse
			if rs != 201 || json.Unmarshal(rb, &r) != nil || v.DiscountAmount == nil || r.DiscountAmount != *v.DiscountAmount {
				t.Fatalf("code %q body %q: validate %s, reserve %d %s", code, body, vb, rs, rb)
			}
			return
		}
		var e wire.Error
		if rs == 201 || json.Unmarshal(rb, &e) != nil || e.Error != v.Error {
			t.Fatalf("code %q body %q: validate %s, reserve %d %s", code, body, vb, rs, rb)
		}
	})
}
