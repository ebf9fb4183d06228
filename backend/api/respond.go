package api

import (
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// respondJSON answers status with v as JSON.
func respondJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		respondError(ctx, fasthttp.StatusInternalServerError, wire.CodeInternal, "encode answer")
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// respondError answers status with {"error": code, "message": message}.
func respondError(ctx *fasthttp.RequestCtx, status int, code, message string) {
	if status == fasthttp.StatusServiceUnavailable {
		ctx.Response.Header.Set("Retry-After", "1")
	}
	b, _ := json.Marshal(wire.Error{Error: code, Message: message})
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// outcomes maps each domain outcome to its answer: the one place where they meet HTTP.
var outcomes = []struct {
	err    error
	status int
	code   string
}{
	{voucher.ErrOutOfStock, fasthttp.StatusConflict, wire.CodeOutOfStock},
	{voucher.ErrAlreadyUsed, fasthttp.StatusConflict, wire.CodeAlreadyUsed},
	{voucher.ErrNotEligible, fasthttp.StatusUnprocessableEntity, wire.CodeNotEligible},
	{voucher.ErrVoucherNotFound, fasthttp.StatusNotFound, wire.CodeVoucherNotFound},
	{voucher.ErrReservationNotFound, fasthttp.StatusNotFound, wire.CodeReservationNotFound},
	{voucher.ErrReleased, fasthttp.StatusConflict, wire.CodeReservationReleased},
	{voucher.ErrConfirmed, fasthttp.StatusConflict, wire.CodeReservationConfirmed},
	{voucher.ErrVoucherExists, fasthttp.StatusConflict, wire.CodeVoucherExists},
}

// respondOutcome answers a service error: its domain outcome, or 503 for anything the client
// may retry.
func (s *Server) respondOutcome(ctx *fasthttp.RequestCtx, err error) {
	for _, o := range outcomes {
		if errors.Is(err, o.err) {
			respondError(ctx, o.status, o.code, err.Error())
			return
		}
	}
	level := slog.LevelWarn
	if !errors.Is(err, voucher.ErrUnavailable) {
		level = slog.LevelError
	}
	s.log.Log(ctx, level, "request failed", "method", string(ctx.Method()), "path", string(ctx.Path()), "err", err)
	respondError(ctx, fasthttp.StatusServiceUnavailable, wire.CodeUnavailable,
		"a store did not answer in time; retry with the same orderId")
}
