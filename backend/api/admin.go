package api

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// authorized checks the admin bearer token. Without a configured token the admin API is off.
func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	if s.opts.AdminToken == "" {
		respondError(ctx, fasthttp.StatusForbidden, wire.CodeForbidden, "the admin API is off: set VG_ADMIN_TOKEN")
		return false
	}
	sent := ctx.Request.Header.Peek("Authorization")
	if subtle.ConstantTimeCompare(sent, []byte("Bearer "+s.opts.AdminToken)) != 1 {
		// what was sent, never what the token is: a missing token, another scheme, a wrong one
		msg := "the admin token is wrong: send the backend's VG_ADMIN_TOKEN as Authorization: Bearer <VG_ADMIN_TOKEN>"
		switch {
		case len(sent) == 0:
			msg = "no admin token: send Authorization: Bearer <VG_ADMIN_TOKEN>"
		case !bytes.HasPrefix(sent, []byte("Bearer ")):
			msg = "the Authorization header is not a bearer token: send Authorization: Bearer <VG_ADMIN_TOKEN>"
		}
		ctx.Response.Header.Set("WWW-Authenticate", "Bearer")
		respondError(ctx, fasthttp.StatusUnauthorized, wire.CodeUnauthorized, msg)
		return false
	}
	return true
}

func (s *Server) createVoucher(ctx *fasthttp.RequestCtx) {
	spec, err := decodeVoucherSpec(ctx.PostBody())
	if err != nil {
		badRequest(ctx, err)
		return
	}
	v := voucher.Voucher{
		Code: spec.Code, MaxDiscountAmount: spec.MaxDiscountAmount, MinOrderAmount: spec.MinOrderAmount,
		TotalLimit: *spec.TotalLimit, PerUserLimit: *spec.PerUserLimit,
		StartsAt: spec.startsAt, EndsAt: spec.endsAt, FlashSale: spec.FlashSale,
		Paused: spec.Active != nil && !*spec.Active, HoldTTL: spec.holdTTL,
	}
	if spec.DiscountPercent != nil {
		v.DiscountPercent = *spec.DiscountPercent
	} else {
		v.DiscountAmount = *spec.DiscountAmount
	}
	c, cancel := s.context()
	defer cancel()
	if err := s.vouchers.Create(c, v); err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	s.getVoucher(ctx, v.Code)
	if ctx.Response.StatusCode() == fasthttp.StatusOK {
		ctx.SetStatusCode(fasthttp.StatusCreated)
	}
}

func (s *Server) getVoucher(ctx *fasthttp.RequestCtx, code string) {
	c, cancel := s.context()
	defer cancel()
	st, err := s.vouchers.Stats(c, code)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	respondJSON(ctx, fasthttp.StatusOK, voucherView(st, s.vouchers.HoldTTL()))
}

func (s *Server) warmVoucher(ctx *fasthttp.RequestCtx, code string) {
	c, cancel := s.context()
	defer cancel()
	if err := s.vouchers.Warm(c, code); err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	s.getVoucher(ctx, code)
}

func (s *Server) expire(ctx *fasthttp.RequestCtx) {
	c, cancel := s.context()
	defer cancel()
	n, err := s.opts.Jobs.Expire(c)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	respondJSON(ctx, fasthttp.StatusOK, map[string]int{"released": n})
}

// reconcile reconciles every flash voucher, or the one named by ?code= (in any case).
func (s *Server) reconcile(ctx *fasthttp.RequestCtx) {
	code := wire.CanonicalCode(string(ctx.QueryArgs().Peek("code")))
	if code != "" && !wire.ValidCode(code) {
		respondError(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, "code must match ^[A-Z0-9_-]{1,32}$")
		return
	}
	c, cancel := s.context()
	defer cancel()
	reports, err := s.opts.Jobs.Reconcile(c, code)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	out := wire.Reconciliations{Vouchers: make([]wire.Reconciliation, len(reports))}
	for i, r := range reports {
		out.Vouchers[i] = wire.Reconciliation(r)
	}
	respondJSON(ctx, fasthttp.StatusOK, out)
}

// voucherSpec is a checked voucher to create.
type voucherSpec struct {
	wire.VoucherSpec
	startsAt, endsAt time.Time
	holdTTL          time.Duration // 0: VG_HOLD_TTL
}

// decodeVoucherSpec decodes and checks a voucher to create.
func decodeVoucherSpec(body []byte) (voucherSpec, error) {
	var v voucherSpec
	if err := decodeJSON(body, &v.VoucherSpec, lenient); err != nil {
		return v, err
	}
	var err error
	if v.startsAt, err = time.Parse(time.RFC3339, v.StartsAt); err != nil {
		return v, fmt.Errorf("startsAt %q must be an RFC 3339 time such as 2026-12-02T10:00:00Z", v.StartsAt)
	}
	if v.endsAt, err = time.Parse(time.RFC3339, v.EndsAt); err != nil {
		return v, fmt.Errorf("endsAt %q must be an RFC 3339 time such as 2026-12-02T10:00:00Z", v.EndsAt)
	}
	if v.PerUserLimit == nil {
		one := 1
		v.PerUserLimit = &one
	}
	if v.HoldTTL != nil {
		if v.holdTTL, err = parseHoldTTL(*v.HoldTTL); err != nil {
			return v, err
		}
	}
	v.Code = wire.CanonicalCode(v.Code)
	switch {
	case !wire.ValidCode(v.Code):
		return v, fmt.Errorf("code %q must match ^[A-Za-z0-9_-]{1,32}$ (stored upper-cased)", clip(v.Code))
	case v.DiscountAmount == nil && v.DiscountPercent == nil:
		return v, errors.New("discountAmount or discountPercent is required")
	case v.DiscountAmount != nil && v.DiscountPercent != nil:
		return v, errors.New("discountAmount and discountPercent exclude each other: send one")
	case v.MaxDiscountAmount != nil && v.DiscountPercent == nil:
		return v, errors.New("maxDiscountAmount caps a percentage; it goes with discountPercent, not discountAmount")
	case v.TotalLimit == nil:
		return v, errors.New("totalLimit is required")
	case !v.endsAt.After(v.startsAt):
		return v, errors.New("endsAt must be after startsAt")
	}
	return v, checkLimits(v.DiscountAmount, v.DiscountPercent, v.MaxDiscountAmount, &v.MinOrderAmount, v.TotalLimit, v.PerUserLimit)
}
