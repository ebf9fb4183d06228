package proxy

import (
	"bytes"

	"vouchergate/shared/wire"
)

// route is where a request goes.
type route uint8

const (
	routeCheckout route = iota // anything else: the checkout API
	routeLocal                 // the edge's own /healthz, /readyz
	routeReserve               // POST /vouchers/{code}/reservations: may be answered here
	routeValidate              // POST /vouchers/{code}/validate, a reservation's dry run: may be answered here
	routeConfirm               // POST /vouchers/{code}/reservations/{orderId}/confirm
	routeRelease               // DELETE /vouchers/{code}/reservations/{orderId}
	routeRefund                // POST /vouchers/{code}/reservations/{orderId}/refund
	routeQuota                 // /quotas/deduct, /quotas/rollback, /quotas/check, /quotas/usage
	routeNotFound              // a backend path that does not exist, or one the edge hides
	routeBadCode               // a voucher path with an invalid code
	routeBadOrder              // a reservation path with an invalid orderId
)

// match is a request path's route, the one method it takes ("" for any), and the voucher code
// and orderId in it, as slices of the path.
type match struct {
	route route
	allow string
	code  []byte
	order []byte
}

var (
	prefixVouchers = []byte("/vouchers/")
	prefixQuotas   = []byte("/quotas/")
	prefixAdmin    = []byte("/admin")
	segReservation = []byte("reservations")
	segConfirm     = []byte("confirm")
	segRefund      = []byte("refund")
	segValidate    = []byte("validate")
)

// matchPath routes a normalized, decoded path (fasthttp's ctx.Path). It does not allocate.
// Voucher codes are case-insensitive: it upper-cases a voucher path's code in place, so the
// sold-out cache is asked for the code as stored and the path forwarded names it so too.
func matchPath(path []byte) match {
	switch string(path) {
	case "/healthz", "/readyz":
		return match{route: routeLocal, allow: "GET"}
	case "/metrics":
		return match{route: routeNotFound} // on the ops listener only
	case "/vouchers", "/quotas":
		return match{route: routeNotFound}
	}
	switch {
	case bytes.HasPrefix(path, prefixAdmin) && (len(path) == len(prefixAdmin) || path[len(prefixAdmin)] == '/'):
		return match{route: routeNotFound} // the admin API is not exposed
	case bytes.HasPrefix(path, prefixVouchers):
		return matchVoucher(path[len(prefixVouchers):])
	case bytes.HasPrefix(path, prefixQuotas):
		switch string(path[len(prefixQuotas):]) {
		case "deduct", "rollback", "check":
			return match{route: routeQuota, allow: "POST"}
		case "usage":
			return match{route: routeQuota, allow: "GET"}
		}
		return match{route: routeNotFound}
	}
	return match{route: routeCheckout}
}

// matchVoucher routes what follows /vouchers/, upper-casing the code in place.
func matchVoucher(rest []byte) match {
	code, rest, _ := bytes.Cut(rest, []byte{'/'})
	wire.UpperCode(code)
	if !wire.ValidCode(string(code)) {
		return match{route: routeBadCode}
	}
	seg, rest, more := bytes.Cut(rest, []byte{'/'})
	if !more && bytes.Equal(seg, segValidate) {
		return match{route: routeValidate, allow: "POST", code: code}
	}
	if !bytes.Equal(seg, segReservation) {
		return match{route: routeNotFound} // includes /state: for edges, not for clients
	}
	if !more {
		return match{route: routeReserve, allow: "POST", code: code}
	}
	order, rest, more := bytes.Cut(rest, []byte{'/'})
	m := match{code: code, order: order}
	switch {
	case !more:
		m.route, m.allow = routeRelease, "DELETE"
	case bytes.Equal(rest, segConfirm):
		m.route, m.allow = routeConfirm, "POST"
	case bytes.Equal(rest, segRefund):
		m.route, m.allow = routeRefund, "POST"
	default:
		return match{route: routeNotFound}
	}
	if wire.CheckID("orderId", string(order), wire.MaxOrderIDLen) != nil {
		m.route = routeBadOrder
	}
	return m
}

// Endpoint is an operation the edge serves on its public listener, its path written as the
// OpenAPI document writes it ("/vouchers/{code}/reservations").
type Endpoint struct {
	Method, Path string
}

// servedRoutes is every operation the edge answers or forwards to a backend, with the route
// matchPath gives its paths. matchPath stays a function (the sold-out path must not allocate
// or walk a table); TestServedRoutesAreWhatMatchPathServes holds the two together both ways,
// and edge/proxy's OpenAPI test holds this table to the document's x-edge operations.
var servedRoutes = [...]struct {
	Endpoint
	route route
}{
	{Endpoint{"GET", "/healthz"}, routeLocal},
	{Endpoint{"GET", "/readyz"}, routeLocal},
	{Endpoint{"POST", "/vouchers/{code}/reservations"}, routeReserve},
	{Endpoint{"POST", "/vouchers/{code}/validate"}, routeValidate},
	{Endpoint{"POST", "/vouchers/{code}/reservations/{orderId}/confirm"}, routeConfirm},
	{Endpoint{"DELETE", "/vouchers/{code}/reservations/{orderId}"}, routeRelease},
	{Endpoint{"POST", "/vouchers/{code}/reservations/{orderId}/refund"}, routeRefund},
	{Endpoint{"POST", "/quotas/deduct"}, routeQuota},
	{Endpoint{"POST", "/quotas/check"}, routeQuota},
	{Endpoint{"POST", "/quotas/rollback"}, routeQuota},
	{Endpoint{"GET", "/quotas/usage"}, routeQuota},
}

// Routes returns the operations the edge serves on its public listener (every other path goes
// to the checkout API, or answers 404 when it is a backend path the edge hides).
func Routes() []Endpoint {
	out := make([]Endpoint, len(servedRoutes))
	for i, r := range servedRoutes {
		out[i] = r.Endpoint
	}
	return out
}
