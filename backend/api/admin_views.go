package api

import "github.com/valyala/fasthttp"

// listVouchers answers GET /admin/vouchers. (Being built: issue 13's admin views.)
func (s *Server) listVouchers(ctx *fasthttp.RequestCtx) { notFound(ctx) }

// listRedemptions answers GET /admin/vouchers/{code}/redemptions. (Being built.)
func (s *Server) listRedemptions(ctx *fasthttp.RequestCtx, code string) { notFound(ctx) }
