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
		Code: spec.Code, DiscountAmount: *spec.DiscountAmount, MinOrderAmount: spec.MinOrderAmount,
		TotalLimit: *spec.TotalLimit, PerUserLimit: *spec.PerUserLimit,
		StartsAt: spec.startsAt, EndsAt: spec.endsAt, FlashSale: spec.FlashSale,
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
	respondJSON(ctx, fasthttp.StatusOK, voucherView(st))
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

// reconcile reconciles every flash voucher, or the one named by ?code=.
func (s *Server) reconcile(ctx *fasthttp.RequestCtx) {
	code := string(ctx.QueryArgs().Peek("code"))
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
	switch {
	case !wire.ValidCode(v.Code):
		return v, fmt.Errorf("code %q must match ^[A-Z0-9_-]{1,32}$", v.Code)
	case v.DiscountAmount == nil:
		return v, errors.New("discountAmount is required")
	case *v.DiscountAmount < 0:
		return v, errors.New("discountAmount must not be negative")
	case v.MinOrderAmount < 0:
		return v, errors.New("minOrderAmount must not be negative")
	case v.TotalLimit == nil:
		return v, errors.New("totalLimit is required")
	case *v.TotalLimit < 0 || *v.TotalLimit > wire.MaxTotalLimit:
		return v, fmt.Errorf("totalLimit must be between 0 and %d", wire.MaxTotalLimit)
	case *v.PerUserLimit < 1 || *v.PerUserLimit > wire.MaxPerUserLimit:
		return v, fmt.Errorf("perUserLimit must be between 1 and %d", wire.MaxPerUserLimit)
	case !v.endsAt.After(v.startsAt):
		return v, errors.New("endsAt must be after startsAt")
	}
	return v, nil
}
