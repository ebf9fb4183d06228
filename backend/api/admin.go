package api

import (
	"crypto/subtle"

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
	want := "Bearer " + s.opts.AdminToken
	if subtle.ConstantTimeCompare(ctx.Request.Header.Peek("Authorization"), []byte(want)) != 1 {
		ctx.Response.Header.Set("WWW-Authenticate", "Bearer")
		respondError(ctx, fasthttp.StatusUnauthorized, wire.CodeUnauthorized, "send Authorization: Bearer <VG_ADMIN_TOKEN>")
		return false
	}
	return true
}

// routeAdmin routes /admin/... after authorization.
func (s *Server) routeAdmin(ctx *fasthttp.RequestCtx, seg [][]byte) {
	switch {
	case len(seg) == 1 && string(seg[0]) == "vouchers":
		if allow(ctx, "POST") {
			s.createVoucher(ctx)
		}
	case len(seg) >= 2 && string(seg[0]) == "vouchers":
		code := string(seg[1])
		if !wire.ValidCode(code) {
			respondError(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, "voucher code must match ^[A-Z0-9_-]{1,32}$")
			return
		}
		switch {
		case len(seg) == 2:
			if allow(ctx, "GET") {
				s.getVoucher(ctx, code)
			}
		case len(seg) == 3 && string(seg[2]) == "warmup":
			if allow(ctx, "POST") {
				s.warmVoucher(ctx, code)
			}
		default:
			notFound(ctx)
		}
	case len(seg) == 1 && string(seg[0]) == "expire" && s.opts.Jobs != nil:
		if allow(ctx, "POST") {
			s.expire(ctx)
		}
	case len(seg) == 1 && string(seg[0]) == "reconcile" && s.opts.Jobs != nil:
		if allow(ctx, "POST") {
			s.reconcile(ctx)
		}
	case len(seg) >= 1 && string(seg[0]) == "quota-rules" && s.opts.Quota != nil:
		s.routeQuotaRules(ctx, seg[1:])
	default:
		notFound(ctx)
	}
}

func (s *Server) routeQuotaRules(ctx *fasthttp.RequestCtx, seg [][]byte) {
	q := s.opts.Quota
	method := string(ctx.Method())
	switch {
	case len(seg) == 0 && method == "POST":
		q.PutRule(ctx)
	case len(seg) == 0:
		if allow(ctx, "GET") {
			q.ListRules(ctx)
		}
	case len(seg) == 1 && method == "DELETE":
		q.DeleteRule(ctx)
	case len(seg) == 1:
		if allow(ctx, "GET") {
			q.GetRule(ctx)
		}
	default:
		notFound(ctx)
	}
}

func (s *Server) createVoucher(ctx *fasthttp.RequestCtx) {
	spec, err := decodeVoucherSpec(ctx.PostBody())
	if err != nil {
		respondError(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, err.Error())
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
	respondJSON(ctx, fasthttp.StatusOK, wire.VoucherView{
		Code: st.Code, DiscountAmount: st.DiscountAmount, MinOrderAmount: st.MinOrderAmount,
		TotalLimit: st.TotalLimit, PerUserLimit: st.PerUserLimit, StartsAt: st.StartsAt, EndsAt: st.EndsAt,
		FlashSale: st.FlashSale, UsedCount: st.UsedCount, Counts: st.ByStatus, RedisRemaining: st.RedisRemaining,
	})
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
	if reports == nil {
		reports = []voucher.Reconciliation{}
	}
	respondJSON(ctx, fasthttp.StatusOK, map[string]any{"vouchers": reports})
}
