// Package quotaapi answers the purchase quota endpoints over fasthttp: it decodes and checks
// requests, calls the quota service, and maps its outcomes to status codes and JSON bodies in
// one place (answer.go). The router (not here) routes:
//
//	POST   /quotas/deduct             Deduct
//	POST   /quotas/rollback           Rollback
//	GET    /quotas/usage              Usage
//	POST   /admin/quota-rules         PutRule     (admin auth by the router)
//	GET    /admin/quota-rules         ListRules   (optional ?bizId=)
//	GET    /admin/quota-rules/{id}    GetRule
//	DELETE /admin/quota-rules/{id}    DeleteRule
package quotaapi

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/quota"
	"vouchergate/shared/wire"
)

// Options tunes the handlers; zero values take the defaults noted.
type Options struct {
	MaxBodyBytes int           // larger bodies get 413 PAYLOAD_TOO_LARGE (8192, as VG_MAX_BODY_BYTES)
	DBTimeout    time.Duration // bound on an admin call's PostgreSQL work (2s, as VG_DB_TIMEOUT)
	Log          *slog.Logger
}

// Handlers holds one method per endpoint. It is safe for concurrent use.
type Handlers struct {
	svc       *quota.Service
	maxBody   int
	dbTimeout time.Duration
	log       *slog.Logger
	// decodeDeduct reads a deduct body; a field so that benchmarks can compare decoders.
	decodeDeduct func([]byte, *wire.QuotaDeductRequest) error
}

// New returns the handlers over svc.
func New(svc *quota.Service, opts Options) *Handlers {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 8192
	}
	if opts.DBTimeout <= 0 {
		opts.DBTimeout = 2 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return &Handlers{svc: svc, maxBody: opts.MaxBodyBytes, dbTimeout: opts.DBTimeout, log: opts.Log, decodeDeduct: decodeDeduct}
}

// The Redis calls of deduct, rollback and usage are bounded by the Redis client's own
// timeouts (VG_REDIS_TIMEOUT), so they take a background context: a *fasthttp.RequestCtx is
// only a context while a server runs it.

// Deduct answers POST /quotas/deduct: 200 wire.QuotaDeductResponse (also to every retry of
// the idemKey), 409 wire.QuotaExceeded, 409 QUOTA_ROLLED_BACK or IDEMPOTENCY_KEY_REUSED,
// 400, 413, 503 (outcome may be unknown: retry with the same idemKey or roll back).
func (h *Handlers) Deduct(ctx *fasthttp.RequestCtx) {
	var req wire.QuotaDeductRequest
	if !decodeWith(h, ctx, &req, h.decodeDeduct) {
		return
	}
	items, err := deductItems(&req)
	if err != nil {
		h.fail(ctx, err)
		return
	}
	res, err := h.svc.Deduct(context.Background(), req.BizID, req.IdemKey, items)
	if err != nil {
		h.fail(ctx, err)
		return
	}
	out := wire.QuotaDeductResponse{IdemKey: res.IdemKey, Counters: make([]wire.QuotaCounter, len(res.Counters))}
	for i := range res.Counters {
		out.Counters[i] = counterWire(&res.Counters[i])
	}
	h.json(ctx, fasthttp.StatusOK, &out)
}

// deductItems converts items, reading an absent amount as 1. Bounds are the service's to check,
// except the item count, checked first so that a huge list is not copied.
func deductItems(req *wire.QuotaDeductRequest) ([]quota.Item, error) {
	if len(req.Items) > wire.MaxQuotaItems {
		return nil, &quota.InvalidError{Msg: "items holds " + strconv.Itoa(len(req.Items)) +
			" items; at most " + strconv.Itoa(wire.MaxQuotaItems)}
	}
	items := make([]quota.Item, len(req.Items))
	for i := range req.Items {
		it := &req.Items[i]
		amount := int64(1)
		if it.Amount != nil {
			amount = *it.Amount
		}
		items[i] = quota.Item{IdentityType: it.IdentityType, Identity: it.Identity, Dimensions: it.Dimensions, Amount: amount}
	}
	return items, nil
}

// Rollback answers POST /quotas/rollback: 200 wire.QuotaRollbackResponse saying what this call
// gave back (nothing for an unknown or already rolled back idemKey), 400, 413, 503.
func (h *Handlers) Rollback(ctx *fasthttp.RequestCtx) {
	var req wire.QuotaRollbackRequest
	if !decodeWith(h, ctx, &req, decodeRollback) {
		return
	}
	res, err := h.svc.Rollback(context.Background(), req.BizID, req.IdemKey)
	if err != nil {
		h.fail(ctx, err)
		return
	}
	out := wire.QuotaRollbackResponse{IdemKey: res.IdemKey, Returned: make([]wire.QuotaReturned, len(res.Returned))}
	for i, r := range res.Returned {
		out.Returned[i] = wire.QuotaReturned{IdentityType: r.IdentityType, Identity: r.Identity,
			Dimension: r.Dimension, Window: windowWire(r.Window), Amount: r.Amount}
	}
	h.json(ctx, fasthttp.StatusOK, &out)
}

// Usage answers GET /quotas/usage?bizId=&identityType=&identity=&dimension= (dimension may
// repeat, or be left out for the counters of every rule that names its dimension): 200
// wire.QuotaUsageResponse, 400, 503. Values are URL-decoded, so a phone number's '+' must be
// sent as %2B.
func (h *Handlers) Usage(ctx *fasthttp.RequestCtx) {
	q := ctx.QueryArgs()
	bizID, err := positiveInt("bizId", q.Peek("bizId"))
	if err != nil {
		h.fail(ctx, err)
		return
	}
	var dims []string
	for _, d := range q.PeekMulti("dimension") {
		dims = append(dims, string(d))
		if len(dims) > wire.MaxItemDimensions {
			break // the service names the bound
		}
	}
	typ, identity := string(q.Peek("identityType")), string(q.Peek("identity"))
	cs, err := h.svc.Usage(context.Background(), bizID, typ, identity, dims)
	if err != nil {
		h.fail(ctx, err)
		return
	}
	out := wire.QuotaUsageResponse{BizID: bizID, IdentityType: typ, Identity: identity, Counters: make([]wire.QuotaCounter, len(cs))}
	for i := range cs {
		out.Counters[i] = counterWire(&cs[i])
	}
	h.json(ctx, fasthttp.StatusOK, &out)
}

// positiveInt reads a query parameter that must be a positive integer.
func positiveInt(name string, v []byte) (int64, error) {
	if len(v) == 0 {
		return 0, &quota.InvalidError{Msg: name + " is required"}
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n <= 0 {
		return 0, &quota.InvalidError{Msg: name + " must be a positive integer"}
	}
	return n, nil
}

// ruleID reads {id} of /admin/quota-rules/{id}: a router's "id" user value if it set one,
// else the path's last segment.
func ruleID(ctx *fasthttp.RequestCtx) (int64, error) {
	var v []byte
	switch u := ctx.UserValue("id").(type) {
	case string:
		v = []byte(u)
	case []byte:
		v = u
	default:
		p := ctx.Path()
		v = p[bytes.LastIndexByte(p, '/')+1:]
	}
	return positiveInt("rule id", v)
}
