package api

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/quota"
	"vouchergate/shared/wire"
)

// The admin routes of quota overrides, counter resets and business line settings: admin token
// only, as every /admin path (server.go).
var quotaAdminRoutes = []endpoint{
	{Endpoint: Endpoint{"POST", "/admin/quota-overrides"}, name: "admin_put_override", on: quotasOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, _ params) { s.putOverride(ctx) }},
	{Endpoint: Endpoint{"GET", "/admin/quota-overrides"}, name: "admin_overrides", on: quotasOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, _ params) { s.listOverrides(ctx) }},
	{Endpoint: Endpoint{"GET", "/admin/quota-overrides/{id}"}, name: "admin_override", on: quotasOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) { s.overrideByID(ctx, p.id, s.quotas.OverrideByID) }},
	{Endpoint: Endpoint{"DELETE", "/admin/quota-overrides/{id}"}, name: "admin_delete_override", on: quotasOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, p params) {
			s.overrideByID(ctx, p.id, s.quotas.DeleteOverride)
		}},
	{Endpoint: Endpoint{"POST", "/admin/quota-counters/reset"}, name: "admin_reset_counters", on: quotasOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, _ params) { s.resetCounters(ctx) }},
	{Endpoint: Endpoint{"GET", "/admin/quota-counters/resets"}, name: "admin_resets", on: quotasOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, _ params) { s.listResets(ctx) }},
	{Endpoint: Endpoint{"POST", "/admin/quota-settings"}, name: "admin_put_setting", on: quotasOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, _ params) { s.putSetting(ctx) }},
	{Endpoint: Endpoint{"GET", "/admin/quota-settings"}, name: "admin_settings", on: quotasOn,
		handle: func(s *Server, ctx *fasthttp.RequestCtx, _ params) { s.listSettings(ctx) }},
}

// putOverride answers POST /admin/quota-overrides with a wire.QuotaOverrideRequest: 201
// wire.QuotaOverride when created, 200 when the rule's override for the identity was replaced;
// 400, 404 QUOTA_RULE_NOT_FOUND (no such rule to override), 409 TOO_MANY_QUOTA_OVERRIDES, 413,
// 503.
func (s *Server) putOverride(ctx *fasthttp.RequestCtx) {
	var req wire.QuotaOverrideRequest
	if err := decodeJSON(ctx.PostBody(), &req, strict); err != nil {
		badRequest(ctx, err)
		return
	}
	if req.Limit == nil {
		badRequest(ctx, errors.New("limit is required: the identity's limit in place of the rule's (0 blocks it)"))
		return
	}
	w, err := windowFromWire(&req.Window)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	c, cancel := s.dbContext()
	defer cancel()
	saved, created, err := s.quotas.PutOverride(c, quota.Override{BizID: req.BizID, IdentityType: req.IdentityType,
		Identity: req.Identity, Dimension: req.Dimension, Window: w, Limit: *req.Limit, ExpiresAt: req.ExpiresAt})
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	status := fasthttp.StatusOK
	if created {
		status = fasthttp.StatusCreated
	}
	out := overrideWire(&saved)
	respondJSON(ctx, status, &out)
}

// listOverrides answers GET /admin/quota-overrides[?bizId=&identityType=&identity=]: 200
// wire.QuotaOverrides, those in force, by id; 400, 503.
func (s *Server) listOverrides(ctx *fasthttp.RequestCtx) {
	q, err := readQuery(ctx.QueryArgs(), "bizId", "identityType", "identity")
	if err != nil {
		badRequest(ctx, err)
		return
	}
	bizID, err := optionalBizID(q)
	if err != nil {
		badRequest(ctx, err)
		return
	}
	c, cancel := s.dbContext()
	defer cancel()
	os, err := s.quotas.Overrides(c, bizID, q["identityType"], q["identity"])
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	out := wire.QuotaOverrides{Overrides: make([]wire.QuotaOverride, len(os))}
	for i := range os {
		out.Overrides[i] = overrideWire(&os[i])
	}
	respondJSON(ctx, fasthttp.StatusOK, &out)
}

// overrideByID answers GET (do: OverrideByID) and DELETE (do: DeleteOverride)
// /admin/quota-overrides/{id}: 200 wire.QuotaOverride, 400, 404 QUOTA_OVERRIDE_NOT_FOUND, 503.
func (s *Server) overrideByID(ctx *fasthttp.RequestCtx, rawID []byte, do func(context.Context, int64) (quota.Override, error)) {
	id, err := positiveInt("override id", rawID)
	if err != nil {
		badRequest(ctx, err)
		return
	}
	c, cancel := s.dbContext()
	defer cancel()
	o, err := do(c, id)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	out := overrideWire(&o)
	respondJSON(ctx, fasthttp.StatusOK, &out)
}

func overrideWire(o *quota.Override) wire.QuotaOverride {
	return wire.QuotaOverride{ID: o.ID, RuleID: o.RuleID, BizID: o.BizID, IdentityType: o.IdentityType, Identity: o.Identity,
		Dimension: o.Dimension, Window: windowWire(o.Window), Limit: o.Limit, ExpiresAt: o.ExpiresAt,
		CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt}
}

// resetCounters answers POST /admin/quota-counters/reset with a wire.QuotaResetRequest: 200
// wire.QuotaReset, DONE with what it cleared; 400, 413, 503 (nothing done, or the reset may have
// run: its record says UNKNOWN).
func (s *Server) resetCounters(ctx *fasthttp.RequestCtx) {
	var req wire.QuotaResetRequest
	if err := decodeJSON(ctx.PostBody(), &req, strict); err != nil {
		badRequest(ctx, err)
		return
	}
	c, cancel := s.dbContext()
	defer cancel()
	r, err := s.quotas.ResetCounters(c, req.BizID, req.IdentityType, req.Identity, req.Dimension)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	out := resetWire(&r)
	respondJSON(ctx, fasthttp.StatusOK, &out)
}

// listResets answers GET /admin/quota-counters/resets?bizId=[&identityType=&identity=][&limit=]:
// 200 wire.QuotaResets, newest first (limit 1-500, 50); 400, 503.
func (s *Server) listResets(ctx *fasthttp.RequestCtx) {
	q, err := readQuery(ctx.QueryArgs(), "bizId", "identityType", "identity", "limit")
	if err != nil {
		badRequest(ctx, err)
		return
	}
	bizID, err := positiveInt("bizId", []byte(q["bizId"]))
	if err != nil {
		badRequest(ctx, err)
		return
	}
	typ, identity := q["identityType"], q["identity"]
	if (typ == "") != (identity == "") {
		badRequest(ctx, errors.New("identityType and identity go together: give both, or neither for the business line's resets"))
		return
	}
	limit, err := pageLimit(q)
	if err != nil {
		badRequest(ctx, err)
		return
	}
	c, cancel := s.dbContext()
	defer cancel()
	rs, err := s.quotas.Resets(c, bizID, typ, identity, limit)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	out := wire.QuotaResets{Resets: make([]wire.QuotaReset, len(rs))}
	for i := range rs {
		out.Resets[i] = resetWire(&rs[i])
	}
	respondJSON(ctx, fasthttp.StatusOK, &out)
}

func resetWire(r *quota.Reset) wire.QuotaReset {
	out := wire.QuotaReset{ID: r.ID, BizID: r.BizID, IdentityType: r.IdentityType, Identity: r.Identity, Dimension: r.Dimension,
		ResetAt: r.ResetAt, Outcome: string(r.Outcome), Cleared: make([]wire.QuotaCleared, len(r.Cleared))}
	for i, c := range r.Cleared {
		out.Cleared[i] = wire.QuotaCleared{Dimension: c.Dimension, Window: windowWire(c.Window), Used: c.Used}
	}
	return out
}

// putSetting answers POST /admin/quota-settings with a wire.QuotaSettingRequest: 200
// wire.QuotaSetting; 400, 413, 503.
func (s *Server) putSetting(ctx *fasthttp.RequestCtx) {
	var req wire.QuotaSettingRequest
	if err := decodeJSON(ctx.PostBody(), &req, strict); err != nil {
		badRequest(ctx, err)
		return
	}
	c, cancel := s.dbContext()
	defer cancel()
	st, err := s.quotas.PutSetting(c, quota.Setting{BizID: req.BizID, WhenUnavailable: quota.WhenUnavailable(req.WhenUnavailable)})
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	respondJSON(ctx, fasthttp.StatusOK, &wire.QuotaSetting{BizID: st.BizID, WhenUnavailable: string(st.WhenUnavailable), UpdatedAt: st.UpdatedAt})
}

// listSettings answers GET /admin/quota-settings[?bizId=]: 200 wire.QuotaSettings, the business
// lines with a setting stored (any other is CLOSED); 400, 503.
func (s *Server) listSettings(ctx *fasthttp.RequestCtx) {
	q, err := readQuery(ctx.QueryArgs(), "bizId")
	if err != nil {
		badRequest(ctx, err)
		return
	}
	bizID, err := optionalBizID(q)
	if err != nil {
		badRequest(ctx, err)
		return
	}
	c, cancel := s.dbContext()
	defer cancel()
	sts, err := s.quotas.Settings(c, bizID)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	out := wire.QuotaSettings{Settings: make([]wire.QuotaSetting, len(sts))}
	for i, st := range sts {
		out.Settings[i] = wire.QuotaSetting{BizID: st.BizID, WhenUnavailable: string(st.WhenUnavailable), UpdatedAt: st.UpdatedAt}
	}
	respondJSON(ctx, fasthttp.StatusOK, &out)
}

// optionalBizID reads a list's bizId filter: 0 when not given.
func optionalBizID(q map[string]string) (int64, error) {
	v, given := q["bizId"]
	if !given {
		return 0, nil
	}
	return positiveInt("bizId", []byte(v))
}
