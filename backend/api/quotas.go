package api

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/quota"
	"vouchergate/shared/wire"
)

// The purchase quota endpoints. Their Redis calls are bounded by the Redis client's own
// timeouts (VG_REDIS_TIMEOUT), so they take a background context: a deduct cut short by a
// deadline of ours could not give back the steps it took.

// deduction reads a deduct's body (deduct's and check's) and checks its identities against
// the caller's shopper; it answers 400 or 403 and returns false when the request may not go on.
func (s *Server) deduction(ctx *fasthttp.RequestCtx, sh *wire.Shopper) (wire.QuotaDeductRequest, []quota.Item, bool) {
	req, items, err := decodeDeduct(ctx.PostBody(), s.readDeduct)
	if err != nil {
		badRequest(ctx, err)
		return req, nil, false
	}
	if !s.shopperOwnsItems(ctx, sh, items) {
		return req, nil, false
	}
	return req, items, true
}

// deduct answers POST /quotas/deduct: 200 wire.QuotaDeductResponse (also to every retry of
// the idemKey), 409 wire.QuotaExceeded, 409 QUOTA_ROLLED_BACK or IDEMPOTENCY_KEY_REUSED,
// 400, 413, 503 (outcome may be unknown: retry with the same idemKey or roll back).
func (s *Server) deduct(ctx *fasthttp.RequestCtx, sh *wire.Shopper) {
	req, items, ok := s.deduction(ctx, sh)
	if !ok {
		return
	}
	s.deductItems(ctx, sh, req.BizID, req.IdemKey, items)
}

// deductItems deducts items (for the shopper sh, if any) and answers as POST /quotas/deduct.
func (s *Server) deductItems(ctx *fasthttp.RequestCtx, sh *wire.Shopper, bizID int64, idemKey string, items []quota.Item) {
	res, err := s.quotaCalls(sh).Deduct(context.Background(), bizID, idemKey, items)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	out := wire.QuotaDeductResponse{IdemKey: res.IdemKey, Counters: make([]wire.QuotaCounter, len(res.Counters)),
		WouldExceed: wouldExceedWire(res.WouldExceed), Degraded: res.Degraded, Warning: unruledWarning(res)}
	for i := range res.Counters {
		out.Counters[i] = counterWire(&res.Counters[i])
	}
	respondJSON(ctx, fasthttp.StatusOK, &out)
}

// wouldExceedWire is the wire form of the SHADOW rules a deduct passed; nil when none.
func wouldExceedWire(ws []quota.WouldExceed) []wire.QuotaWouldExceed {
	if len(ws) == 0 {
		return nil
	}
	out := make([]wire.QuotaWouldExceed, len(ws))
	for i := range ws {
		out[i] = wire.QuotaWouldExceed{RuleID: ws[i].RuleID, Counter: counterWire(&ws[i].Counter)}
	}
	return out
}

// check answers POST /quotas/check, a deduct's dry run with its body, decoded and checked as
// the deduct's: 200 wire.QuotaCheckResponse, passing with the counters a deduct would reach or
// not with the code (and for QUOTA_EXCEEDED the 409 body) it would be refused with; 400, 413,
// 503 as a deduct. A refusal is an answer to the question, so a 200. A service checks a
// shopper's idemKey with ?customerId= (subject.go).
func (s *Server) check(ctx *fasthttp.RequestCtx, sh *wire.Shopper) {
	req, items, ok := s.deduction(ctx, sh)
	if !ok {
		return
	}
	calls, ok := s.quotaCallsNamed(ctx, sh)
	if !ok {
		return
	}
	res, err := calls.Check(context.Background(), req.BizID, req.IdemKey, items)
	if err != nil {
		refused, ok := refusalCode(err)
		if !ok {
			s.respondOutcome(ctx, err)
			return
		}
		out := wire.QuotaCheckResponse{IdemKey: req.IdemKey, Counters: []wire.QuotaCounter{}, Error: refused}
		var ex *quota.ExceededError
		if errors.As(err, &ex) {
			out.Exceeded = exceededWire(refused, ex)
		}
		respondJSON(ctx, fasthttp.StatusOK, &out)
		return
	}
	out := wire.QuotaCheckResponse{Pass: true, IdemKey: res.IdemKey, Counters: make([]wire.QuotaCounter, len(res.Counters)),
		WouldExceed: wouldExceedWire(res.WouldExceed), Degraded: res.Degraded, Warning: unruledWarning(res)}
	for i := range res.Counters {
		out.Counters[i] = counterWire(&res.Counters[i])
	}
	respondJSON(ctx, fasthttp.StatusOK, &out)
}

// rollback answers POST /quotas/rollback: 200 wire.QuotaRollbackResponse saying what this call
// gave back (nothing for an unknown or already rolled back idemKey), 400, 403 (a shopper's item
// of another identity), 409 ROLLBACK_KEY_REUSED, 413, 503. With items and a rollbackKey it is a
// partial rollback (quota.Service.RollbackItems), else the whole. A service rolls back a
// shopper's deduct with ?customerId= naming the shopper (subject.go).
func (s *Server) rollback(ctx *fasthttp.RequestCtx, sh *wire.Shopper) {
	var req wire.QuotaRollbackRequest
	if err := decodeJSON(ctx.PostBody(), &req, strict); err != nil {
		badRequest(ctx, err)
		return
	}
	var items []quota.Item
	switch {
	case req.Items != nil && req.RollbackKey == "":
		badRequest(ctx, errors.New("rollbackKey is required with items: it names this partial rollback, so that a retry gives back once"))
		return
	case req.Items == nil && req.RollbackKey != "":
		badRequest(ctx, errors.New("items are required with rollbackKey: what to give back (without both, the whole deduct is rolled back)"))
		return
	case req.Items != nil:
		var err error
		if items, err = quotaItems(req.Items); err != nil {
			badRequest(ctx, err)
			return
		}
	}
	s.rollbackItems(ctx, sh, req.BizID, req.IdemKey, req.RollbackKey, items)
}

// rollbackItems rolls back (for the shopper sh, if any) the deduct of idemKey, in part when
// items are given, and answers as POST /quotas/rollback.
func (s *Server) rollbackItems(ctx *fasthttp.RequestCtx, sh *wire.Shopper, bizID int64, idemKey, rollbackKey string, items []quota.Item) {
	if items != nil && !s.shopperOwnsItems(ctx, sh, items) {
		return
	}
	calls, ok := s.quotaCallsNamed(ctx, sh)
	if !ok {
		return
	}
	var res quota.RollbackResult
	var err error
	if items != nil {
		res, err = calls.RollbackItems(context.Background(), bizID, idemKey, rollbackKey, items)
	} else {
		res, err = calls.Rollback(context.Background(), bizID, idemKey)
	}
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	out := wire.QuotaRollbackResponse{IdemKey: res.IdemKey, RollbackKey: rollbackKey, Returned: make([]wire.QuotaReturned, len(res.Returned)),
		Replayed: res.Replayed}
	for i, r := range res.Returned {
		out.Returned[i] = wire.QuotaReturned{IdentityType: r.IdentityType, Identity: r.Identity,
			Dimension: r.Dimension, Window: windowWire(r.Window), Amount: r.Amount}
	}
	respondJSON(ctx, fasthttp.StatusOK, &out)
}

// quotaItems converts a body's items as decodeDeduct does: an absent amount is 1, and a list
// longer than the wire bounds is refused here.
func quotaItems(in []wire.QuotaItem) ([]quota.Item, error) {
	if len(in) > wire.MaxQuotaItems {
		return nil, errTooManyItems
	}
	items := make([]quota.Item, len(in))
	for i := range in {
		it := &in[i]
		if len(it.Dimensions) > wire.MaxItemDimensions {
			return nil, errTooManyDimensions
		}
		amount := int64(1)
		if it.Amount != nil {
			amount = *it.Amount
		}
		items[i] = quota.Item{IdentityType: it.IdentityType, Identity: it.Identity, Dimensions: it.Dimensions, Amount: amount}
	}
	return items, nil
}

// usage answers GET /quotas/usage?bizId=&identityType=&identity=&dimension= (dimension may
// repeat, or be left out for every counter of the identity in its current windows): 200
// wire.QuotaUsageResponse, 400, 503. Values are URL-decoded, so a phone number's '+' must be
// sent as %2B.
func (s *Server) usage(ctx *fasthttp.RequestCtx, sh *wire.Shopper) {
	q := ctx.QueryArgs()
	bizID, err := positiveInt("bizId", q.Peek("bizId"))
	if err != nil {
		badRequest(ctx, err)
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
	if !s.shopperMayRead(ctx, sh, typ, identity) {
		return
	}
	cs, err := s.quotas.Usage(context.Background(), bizID, typ, identity, dims)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	out := wire.QuotaUsageResponse{BizID: bizID, IdentityType: typ, Identity: identity, Counters: make([]wire.QuotaCounter, len(cs))}
	for i := range cs {
		out.Counters[i] = counterWire(&cs[i])
	}
	respondJSON(ctx, fasthttp.StatusOK, &out)
}

func counterWire(c *quota.Counter) wire.QuotaCounter {
	out := wire.QuotaCounter{IdentityType: c.IdentityType, Identity: c.Identity, Dimension: c.Dimension,
		Window: windowWire(c.Window), Used: c.Used, Limit: c.Limit, Shadow: c.Shadow}
	if !c.ResetsAt.IsZero() {
		t := c.ResetsAt
		out.ResetsAt = &t
	}
	return out
}

// unruledWarning is the answer's warning for a deduct or check no rule covered.
func unruledWarning(res quota.DeductResult) string {
	if res.Unruled {
		return wire.WarningNoQuotaRules
	}
	return ""
}
