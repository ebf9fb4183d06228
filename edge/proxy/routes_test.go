package proxy

import (
	"strings"
	"testing"

	"vouchergate/shared/wire"
)

func TestMatchPath(t *testing.T) {
	tests := []struct {
		path        string
		route       route
		allow       string
		code, order string
	}{
		{"/vouchers/FLASH/reservations", routeReserve, "POST", "FLASH", ""},
		{"/vouchers/FLASH/reservations/o-1/confirm", routeConfirm, "POST", "FLASH", "o-1"},
		{"/vouchers/FLASH/reservations/o-1", routeRelease, "DELETE", "FLASH", "o-1"},
		{"/vouchers/FLASH/reservations/", routeBadOrder, "DELETE", "FLASH", ""},
		{"/vouchers/FLASH/state", routeNotFound, "", "", ""},
		{"/vouchers/FLASH/validate", routeValidate, "POST", "FLASH", ""},
		{"/vouchers/FLASH/validate/x", routeNotFound, "", "", ""},
		{"/vouchers/bad/validate", routeBadCode, "", "", ""},
		{"/quotas/check", routeQuota, "POST", "", ""},
		{"/vouchers/FLASH", routeNotFound, "", "", ""},
		{"/vouchers/", routeBadCode, "", "", ""},
		{"/vouchers/bad/reservations", routeBadCode, "", "", ""},
		{"/quotas/deduct", routeQuota, "POST", "", ""},
		{"/quotas/usage", routeQuota, "GET", "", ""},
		{"/quotas/", routeNotFound, "", "", ""},
		{"/admin", routeNotFound, "", "", ""},
		{"/admin/vouchers", routeNotFound, "", "", ""},
		{"/administrator", routeCheckout, "", "", ""},
		{"/readyz", routeLocal, "GET", "", ""},
		{"/", routeCheckout, "", "", ""},
		{"/cart/items", routeCheckout, "", "", ""},
	}
	for _, tt := range tests {
		m := matchPath([]byte(tt.path))
		if m.route != tt.route || m.allow != tt.allow || string(m.code) != tt.code || string(m.order) != tt.order {
			t.Errorf("matchPath(%q) = {%s %q %q %q}; want {%s %q %q %q}", tt.path,
				routeNames[m.route], m.allow, m.code, m.order, routeNames[tt.route], tt.allow, tt.code, tt.order)
		}
	}
}

func TestMatchPathDoesNotAllocate(t *testing.T) {
	path := []byte("/vouchers/FLASH100/reservations")
	if n := testing.AllocsPerRun(1000, func() { matchPath(path) }); n != 0 {
		t.Fatalf("matchPath allocates %v times; want 0", n)
	}
}

// FuzzMatchPath checks that no path sends an invalid code or orderId to the backend, and that
// nothing under /admin/ is ever forwarded.
func FuzzMatchPath(f *testing.F) {
	for _, p := range []string{"/vouchers/FLASH/reservations", "/vouchers/A/reservations/o/confirm", "/admin/x", "/quotas/usage", "/x"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		m := matchPath([]byte(path))
		switch m.route {
		case routeReserve, routeValidate, routeConfirm, routeRelease:
			if !wire.ValidCode(string(m.code)) || !strings.HasPrefix(path, "/vouchers/") {
				t.Fatalf("%q routed to the backend with code %q", path, m.code)
			}
			if m.route != routeReserve && m.route != routeValidate && wire.CheckID("orderId", string(m.order), wire.MaxOrderIDLen) != nil {
				t.Fatalf("%q routed to the backend with orderId %q", path, m.order)
			}
		case routeCheckout, routeQuota, routeLocal:
			if path == "/admin" || strings.HasPrefix(path, "/admin/") {
				t.Fatalf("%q would be forwarded", path)
			}
		}
	})
}
