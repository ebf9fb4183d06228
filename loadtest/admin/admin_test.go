package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"vouchergate/shared/wire"
)

// fakeAdmin answers the two admin calls as the backend does, holding vouchers in a map.
func fakeAdmin(t *testing.T, token string) *httptest.Server {
	vouchers := map[string]wire.VoucherView{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		switch {
		case r.Method == "POST" && r.URL.Path == "/admin/vouchers":
			var spec wire.VoucherSpec
			if err := json.NewDecoder(r.Body).Decode(&spec); err != nil || spec.DiscountAmount == nil || spec.TotalLimit == nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			if _, ok := vouchers[spec.Code]; ok {
				w.WriteHeader(http.StatusConflict)
				_, _ = w.Write([]byte(`{"error":"VOUCHER_EXISTS"}`))
				return
			}
			if _, err := time.Parse(time.RFC3339, spec.StartsAt); err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			vouchers[spec.Code] = wire.VoucherView{Code: spec.Code, DiscountAmount: *spec.DiscountAmount,
				TotalLimit: *spec.TotalLimit, PerUserLimit: *spec.PerUserLimit, FlashSale: spec.FlashSale}
			w.WriteHeader(http.StatusCreated)
		case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/admin/vouchers/"):
			v, ok := vouchers[strings.TrimPrefix(r.URL.Path, "/admin/vouchers/")]
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			_ = json.NewEncoder(w).Encode(v)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestCreateThenRead(t *testing.T) {
	srv := fakeAdmin(t, "secret")
	c := New(strings.TrimPrefix(srv.URL, "http://"), "secret") // host:port is taken as http://
	ctx := context.Background()
	spec := Spec{Code: "SALE-1", Discount: 70, TotalLimit: 1000, PerUserLimit: 2, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour), FlashSale: true}
	if err := c.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, spec); !errors.Is(err, ErrVoucherExists) {
		t.Errorf("creating it again: %v, want ErrVoucherExists", err)
	}
	v, err := c.Voucher(ctx, "SALE-1")
	if err != nil || v.DiscountAmount != 70 || v.TotalLimit != 1000 || v.PerUserLimit != 2 || !v.FlashSale {
		t.Errorf("read back %+v, %v", v, err)
	}
	if _, err := c.Voucher(ctx, "NONE"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("an unknown voucher: %v", err)
	}
	if _, err := New(srv.URL, "wrong").Voucher(ctx, "SALE-1"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a wrong token: %v", err)
	}
}
