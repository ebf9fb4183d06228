package api

import (
	"bytes"
	"strings"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/apikeys"
	"vouchergate/shared/wire"
)

// Endpoint is one route the server serves: its method and its path, whose {name} segments are
// parameters (the OpenAPI document's spelling).
type Endpoint struct {
	Method, Path string
}

// endpoint is a route with what serves it. Name is what its requests are counted under.
type endpoint struct {
	Endpoint
	name    string
	parts   []string // Path split at '/', without the leading ""
	hasCode bool     // the path has a {code}, checked before the handler runs
	// scopes are those of which a service API key needs one to call the route (keys.go); none:
	// the route needs no key (probes, and /admin, which has its own token).
	scopes apikeys.Scope
	// on reports whether the route is served by this server (its service configured).
	on     func(s *Server) bool
	handle func(s *Server, ctx *fasthttp.RequestCtx, p params)
}

// params are the path's parameters: {code}, {orderId}, {id}; and the shopper the request acts
// for, when a trusted edge names one (subject.go).
type params struct {
	code    string // a valid voucher code, upper-cased (codes are case-insensitive): serve checked it
	order   string
	id      []byte
	shopper *wire.Shopper // nil when none
}

func vouchersOn(s *Server) bool { return s.vouchers != nil }
func quotasOn(s *Server) bool   { return s.quotas != nil }
func jobsOn(s *Server) bool     { return s.opts.Jobs != nil }
func always(*Server) bool       { return true }

// endpoints is every route, the one place the API's paths are written, with the scopes a service
// API key needs for it. /admin paths are authorized by the admin token before they are routed.
var endpoints = routeTable(append([]endpoint{
	{Endpoint: Endpoint{"GET", "/healthz"}, name: "healthz", on: always,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, _ params) {
			respondJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ok"})
		}},
	{Endpoint: Endpoint{"GET", "/readyz"}, name: "readyz", on: always,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, _ params) { s.ready(ctx) }},

	{Endpoint: Endpoint{"POST", "/vouchers/{code}/reservations"}, name: "reserve", on: vouchersOn, scopes: apikeys.Reserve,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.reserve(ctx, p) }},
	{Endpoint: Endpoint{"POST", "/vouchers/{code}/validate"}, name: "validate", on: vouchersOn, scopes: apikeys.Reserve,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.validate(ctx, p) }},
	{Endpoint: Endpoint{"POST", "/vouchers/{code}/reservations/{orderId}/confirm"}, name: "confirm", on: vouchersOn, scopes: apikeys.Reserve,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.confirm(ctx, p) }},
	{Endpoint: Endpoint{"DELETE", "/vouchers/{code}/reservations/{orderId}"}, name: "release", on: vouchersOn, scopes: apikeys.Reserve,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.release(ctx, p) }},
	{Endpoint: Endpoint{"POST", "/vouchers/{code}/reservations/{orderId}/refund"}, name: "refund", on: vouchersOn, scopes: apikeys.Reserve,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.refund(ctx, p) }},
	{Endpoint: Endpoint{"GET", "/vouchers/{code}/state"}, name: "state", on: vouchersOn, scopes: apikeys.Read,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.state(ctx, p.code) }},

	{Endpoint: Endpoint{"POST", "/quotas/deduct"}, name: "quota_deduct", on: quotasOn, scopes: apikeys.Quota,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.deduct(ctx, p.shopper) }},
	{Endpoint: Endpoint{"POST", "/quotas/check"}, name: "quota_check", on: quotasOn, scopes: apikeys.Quota,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.check(ctx, p.shopper) }},
	{Endpoint: Endpoint{"POST", "/quotas/rollback"}, name: "quota_rollback", on: quotasOn, scopes: apikeys.Quota,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.rollback(ctx, p.shopper) }},
	{Endpoint: Endpoint{"GET", "/quotas/usage"}, name: "quota_usage", on: quotasOn, scopes: apikeys.Quota | apikeys.Read,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.usage(ctx, p.shopper) }},
	{Endpoint: Endpoint{"POST", "/quotas/ops"}, name: "quota_ops", on: quotasOn, scopes: apikeys.Quota,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.quotaOps(ctx, p.shopper) }},

	{Endpoint: Endpoint{"POST", "/admin/vouchers"}, name: "admin_create_voucher", on: vouchersOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, _ params) { s.createVoucher(ctx) }},
	{Endpoint: Endpoint{"GET", "/admin/vouchers"}, name: "admin_list_vouchers", on: vouchersOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, _ params) { s.listVouchers(ctx) }},
	{Endpoint: Endpoint{"GET", "/admin/vouchers/{code}"}, name: "admin_voucher", on: vouchersOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.getVoucher(ctx, p.code) }},
	{Endpoint: Endpoint{"PATCH", "/admin/vouchers/{code}"}, name: "admin_edit_voucher", on: vouchersOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.editVoucher(ctx, p.code) }},
	{Endpoint: Endpoint{"DELETE", "/admin/vouchers/{code}"}, name: "admin_delete_voucher", on: vouchersOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.deleteVoucher(ctx, p.code) }},
	{Endpoint: Endpoint{"GET", "/admin/vouchers/{code}/changes"}, name: "admin_voucher_changes", on: vouchersOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.listChanges(ctx, p.code) }},
	{Endpoint: Endpoint{"GET", "/admin/vouchers/{code}/redemptions"}, name: "admin_redemptions", on: vouchersOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.listRedemptions(ctx, p.code) }},
	{Endpoint: Endpoint{"POST", "/admin/vouchers/{code}/warmup"}, name: "admin_warmup", on: vouchersOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.warmVoucher(ctx, p.code) }},
	{Endpoint: Endpoint{"POST", "/admin/expire"}, name: "admin_expire", on: jobsOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, _ params) { s.expire(ctx) }},
	{Endpoint: Endpoint{"POST", "/admin/reconcile"}, name: "admin_reconcile", on: jobsOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, _ params) { s.reconcile(ctx) }},
	{Endpoint: Endpoint{"POST", "/admin/quota-rules"}, name: "admin_put_rule", on: quotasOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, _ params) { s.putRule(ctx) }},
	{Endpoint: Endpoint{"GET", "/admin/quota-rules"}, name: "admin_rules", on: quotasOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, _ params) { s.listRules(ctx) }},
	{Endpoint: Endpoint{"GET", "/admin/quota-rules/{id}"}, name: "admin_rule", on: quotasOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.ruleByID(ctx, p.id, s.quotas.Rule) }},
	{Endpoint: Endpoint{"DELETE", "/admin/quota-rules/{id}"}, name: "admin_delete_rule", on: quotasOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.ruleByID(ctx, p.id, s.quotas.DeleteRule) }},
}, quotaAdminRoutes...))

// Routes lists every route the API serves (when its service is configured), in the table's order.
func Routes() []Endpoint {
	out := make([]Endpoint, len(endpoints))
	for i, e := range endpoints {
		out[i] = e.Endpoint
	}
	return out
}

func routeTable(es []endpoint) []endpoint {
	for i := range es {
		es[i].parts = strings.Split(es[i].Path[1:], "/")
		es[i].hasCode = strings.Contains(es[i].Path, "{code}")
	}
	return es
}

// routeNotFound and routeBadMethod are the names requests that match no route are counted under.
const (
	routeNotFound  = "not_found"
	routeBadMethod = "method_not_allowed"
)

// route finds the endpoint for the request's path and method. It returns nil with the methods
// the path takes (empty: no such path) when none matches, and the path's parameters.
func (s *Server) route(method []byte, seg [][]byte) (*endpoint, []string, params) {
	var allowed []string
	var p params
	for i := range endpoints {
		e := &endpoints[i]
		if len(e.parts) != len(seg) || !e.on(s) {
			continue
		}
		var q params
		matched := true
		for j, part := range e.parts {
			switch part {
			case "{code}":
				q.code = string(seg[j])
			case "{orderId}":
				q.order = string(seg[j])
			case "{id}":
				q.id = seg[j]
			default:
				matched = part == string(seg[j])
			}
			if !matched {
				break
			}
		}
		if !matched {
			continue
		}
		if string(method) == e.Method {
			return e, nil, q
		}
		allowed, p = append(allowed, e.Method), q
	}
	return nil, allowed, p
}

// splitPath splits a path at '/' after its leading one; ok is false for a path that does not
// start with '/' or is only "/".
func splitPath(path []byte) ([][]byte, bool) {
	if len(path) < 2 || path[0] != '/' {
		return nil, false
	}
	return bytes.Split(path[1:], []byte{'/'}), true
}
