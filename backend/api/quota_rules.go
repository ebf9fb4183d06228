package api

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/quota"
	"vouchergate/shared/wire"
)

// dbContext bounds a quota rule call's PostgreSQL work.
func (s *Server) dbContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.DBTimeout)
}

// putRule answers POST /admin/quota-rules with a wire.QuotaRuleRequest: 201 wire.QuotaRule
// when created, 200 when a rule of the same bizId, identityType, dimension and window got the
// new limit and mode; 400, 409 TOO_MANY_QUOTA_RULES, 413, 503.
func (s *Server) putRule(ctx *fasthttp.RequestCtx) {
	var req wire.QuotaRuleRequest
	if err := decodeJSON(ctx.PostBody(), &req, strict); err != nil {
		badRequest(ctx, err)
		return
	}
	r, err := ruleFromWire(&req)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	c, cancel := s.dbContext()
	defer cancel()
	saved, created, err := s.quotas.PutRule(c, r)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	status := fasthttp.StatusOK
	if created {
		status = fasthttp.StatusCreated
	}
	out := ruleWire(&saved)
	respondJSON(ctx, status, &out)
}

// listRules answers GET /admin/quota-rules[?bizId=]: 200 wire.QuotaRules, 400, 503.
func (s *Server) listRules(ctx *fasthttp.RequestCtx) {
	var bizID int64
	if v := ctx.QueryArgs().Peek("bizId"); v != nil {
		var err error
		if bizID, err = positiveInt("bizId", v); err != nil {
			badRequest(ctx, err)
			return
		}
	}
	c, cancel := s.dbContext()
	defer cancel()
	rs, err := s.quotas.Rules(c, bizID)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	out := wire.QuotaRules{Rules: make([]wire.QuotaRule, len(rs))}
	for i := range rs {
		out.Rules[i] = ruleWire(&rs[i])
	}
	respondJSON(ctx, fasthttp.StatusOK, &out)
}

// ruleByID answers GET (do: Rule) and DELETE (do: DeleteRule, which leaves the counters the
// rule implied to expire) /admin/quota-rules/{id}: 200 wire.QuotaRule, 400, 404
// QUOTA_RULE_NOT_FOUND, 503.
func (s *Server) ruleByID(ctx *fasthttp.RequestCtx, rawID []byte, do func(context.Context, int64) (quota.Rule, error)) {
	id, err := positiveInt("rule id", rawID)
	if err != nil {
		badRequest(ctx, err)
		return
	}
	c, cancel := s.dbContext()
	defer cancel()
	r, err := do(c, id)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	out := ruleWire(&r)
	respondJSON(ctx, fasthttp.StatusOK, &out)
}

func ruleFromWire(req *wire.QuotaRuleRequest) (quota.Rule, error) {
	if req.Limit == nil {
		return quota.Rule{}, &quota.InvalidError{Msg: "limit is required"}
	}
	w, err := windowFromWire(&req.Window)
	if err != nil {
		return quota.Rule{}, err
	}
	r := quota.Rule{BizID: req.BizID, IdentityType: req.IdentityType, Dimension: req.Dimension, Limit: *req.Limit, Window: w,
		Mode: quota.RuleMode(req.Mode)}
	return r, r.Validate()
}

func windowFromWire(w *wire.QuotaWindow) (quota.Window, error) {
	bad := func(msg string) (quota.Window, error) { return quota.Window{}, &quota.InvalidError{Msg: msg} }
	t := quota.WindowType(w.Type)
	switch t {
	case quota.Day, quota.Week, quota.Month:
		if w.Size != "" || w.Start != nil || w.End != nil {
			return bad("a " + w.Type + " window takes only timezone")
		}
		return quota.NewCalendarWindow(t, w.Timezone)
	case quota.Rolling:
		if w.Timezone != "" || w.Start != nil || w.End != nil {
			return bad("a ROLLING window takes only size")
		}
		if w.Size == "" {
			return bad("window.size is required for a ROLLING window, e.g. \"24h\" or \"7d\"")
		}
		d, err := parseSize(w.Size)
		if err != nil {
			return bad("window.size " + strconv.Quote(clip(w.Size)) + " is not a duration such as \"24h\", \"90m\" or \"7d\"")
		}
		return quota.NewRollingWindow(d)
	case quota.Fixed:
		if w.Timezone != "" || w.Size != "" {
			return bad("a FIXED window takes only start and end")
		}
		if w.Start == nil || w.End == nil {
			return bad("window.start and window.end are required for a FIXED window (RFC 3339)")
		}
		return quota.NewFixedWindow(*w.Start, *w.End)
	case "":
		return bad("window.type is required: DAY, WEEK, MONTH, ROLLING or FIXED")
	}
	return bad("window.type " + strconv.Quote(clip(w.Type)) + " is not DAY, WEEK, MONTH, ROLLING or FIXED")
}

// parseSize reads a Go duration, or a whole number of days such as "7d".
func parseSize(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n <= 0 || n > 366 {
			return 0, strconv.ErrSyntax
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// formatSize writes a duration in its largest whole unit: "24h", "90m", "45s", "1500ms".
func formatSize(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func ruleWire(r *quota.Rule) wire.QuotaRule {
	mode := r.Mode
	if mode == "" {
		mode = quota.Enforce
	}
	return wire.QuotaRule{ID: r.ID, BizID: r.BizID, IdentityType: r.IdentityType, Dimension: r.Dimension,
		Limit: r.Limit, Window: windowWire(r.Window), Mode: string(mode), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

func windowWire(w quota.Window) wire.QuotaWindow {
	out := wire.QuotaWindow{Type: string(w.Type), Timezone: w.Timezone}
	switch w.Type {
	case quota.Rolling:
		out.Size = formatSize(w.Size)
	case quota.Fixed:
		start, end := w.Start.UTC(), w.End.UTC()
		out.Start, out.End = &start, &end
	}
	return out
}
