package proxy

import (
	"fmt"
	"strings"
	"testing"

	"vouchergate/shared/wire"
	"vouchergate/testkit"
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
		{"/vouchers/b@d/validate", routeBadCode, "", "", ""},
		{"/vouchers/flash100/validate", routeValidate, "POST", "FLASH100", ""},
		{"/vouchers/Flash_1-x/reservations/o-1", routeRelease, "DELETE", "FLASH_1-X", "o-1"},
		{"/vouchers/FLASH/reservations/o-1/refund", routeRefund, "POST", "FLASH", "o-1"},
		{"/vouchers/flash/reservations/O-1/refund", routeRefund, "POST", "FLASH", "O-1"},
		{"/vouchers/fla\u017fh/reservations", routeBadCode, "", "", ""},
		{"/vouchers/FLAſH/reservations", routeBadCode, "", "", ""},
		{"/quotas/check", routeQuota, "POST", "", ""},
		{"/vouchers/FLASH", routeNotFound, "", "", ""},
		{"/vouchers/", routeBadCode, "", "", ""},
		{"/vouchers/b%d/reservations", routeBadCode, "", "", ""},
		{"/vouchers/bad/reservations", routeReserve, "POST", "BAD", ""},
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
	for _, p := range []string{"/vouchers/FLASH100/reservations", "/vouchers/flash100/reservations"} {
		path := []byte(p)
		if n := testing.AllocsPerRun(1000, func() { copy(path, p); matchPath(path) }); n != 0 {
			t.Fatalf("matchPath(%q) allocates %v times; want 0", p, n)
		}
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
		case routeReserve, routeValidate, routeConfirm, routeRelease, routeRefund:
			if !wire.ValidCode(string(m.code)) || !strings.HasPrefix(path, "/vouchers/") {
				t.Fatalf("%q routed to the backend with code %q", path, m.code)
			}
			if code, _, _ := strings.Cut(path[len("/vouchers/"):], "/"); wire.CanonicalCode(code) != string(m.code) {
				t.Fatalf("%q routed with code %q; the path names %q", path, m.code, wire.CanonicalCode(code))
			}
			if m.route != routeReserve && m.route != routeValidate && wire.CheckID("orderId", string(m.order), wire.MaxOrderIDLen) != nil {
				t.Fatalf("%q routed to the backend with orderId %q", path, m.order)
			}
		case routeCheckout, routeQuota, routeLocal:
			if path == "/admin" || strings.HasPrefix(path, "/admin/") {
				t.Fatalf("%q would be forwarded", path)
			}
		}
		if err := servedAsListed(path, m); err != nil {
			t.Fatal(err)
		}
	})
}

// Each operation of servedRoutes is what matchPath serves for its path, and matchPath serves
// no path that servedRoutes does not list: every path of the OpenAPI document, the table of
// TestMatchPath and FuzzMatchPath's corpus are tried.
func TestServedRoutesAreWhatMatchPathServes(t *testing.T) {
	for _, r := range servedRoutes {
		path := fillPath(r.Path)
		if m := matchPath([]byte(path)); m.route != r.route || m.allow != r.Method {
			t.Errorf("matchPath(%q) = {%s %q}; servedRoutes lists %s %s as %s", path,
				routeNames[m.route], m.allow, r.Method, r.Path, routeNames[r.route])
		}
	}
	paths := []string{"/", "/cart/items", "/metrics", "/vouchers", "/quotas", "/admin", "/administrator",
		"/vouchers/FLASH100", "/vouchers/FLASH100/state", "/vouchers/FLASH100/validate/x",
		"/vouchers/FLASH100/reservations/order-1/confirm/x", "/vouchers/FLASH100/reservations/",
		"/quotas/", "/quotas/usage/x", "/healthz/x", "/readyz/"}
	for path := range testkit.OpenAPI(t).Paths.Map() {
		paths = append(paths, fillPath(path))
	}
	for _, path := range paths {
		if err := servedAsListed(path, matchPath([]byte(path))); err != nil {
			t.Error(err)
		}
	}
}

// servedAsListed checks that m, matchPath's route of path, is one servedRoutes lists, if the
// edge serves it at all.
func servedAsListed(path string, m match) error {
	switch m.route {
	case routeCheckout, routeNotFound, routeBadCode, routeBadOrder:
		return nil // not served: the checkout API's, or refused
	}
	for _, r := range servedRoutes {
		if r.route == m.route && r.Method == m.allow && matchesTemplate(path, r.Path) {
			return nil
		}
	}
	return fmt.Errorf("matchPath serves %s %q as %s, which servedRoutes does not list", m.allow, path, routeNames[m.route])
}

// fillPath puts a valid value in each parameter of an OpenAPI path.
func fillPath(template string) string {
	return strings.NewReplacer("{code}", "FLASH100", "{orderId}", "order-1", "{id}", "1").Replace(template)
}

// matchesTemplate reports whether path is template with each {parameter} one non-empty
// segment.
func matchesTemplate(path, template string) bool {
	ps, ts := strings.Split(path, "/"), strings.Split(template, "/")
	if len(ps) != len(ts) {
		return false
	}
	for i, seg := range ts {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			if ps[i] == "" {
				return false
			}
		} else if ps[i] != seg {
			return false
		}
	}
	return true
}
