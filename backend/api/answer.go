package api

import (
	"encoding/json"
	"log/slog"
	"strconv"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/wire"
)

// respondJSON answers status with v as JSON.
func respondJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		slog.Error("api: encode answer", "path", string(ctx.Path()), "err", err)
		respondError(ctx, fasthttp.StatusInternalServerError, wire.CodeInternal, "encode answer")
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// respondError answers status with {"error": code, "message": message}; a 503 says when to
// retry.
func respondError(ctx *fasthttp.RequestCtx, status int, code, message string) {
	respondErrorWhy(ctx, status, code, "", message)
}

// respondErrorWhy is respondError with the refusal's reason (NOT_ELIGIBLE's), "" for none.
func respondErrorWhy(ctx *fasthttp.RequestCtx, status int, code, reason, message string) {
	if status == fasthttp.StatusServiceUnavailable {
		ctx.Response.Header.Set("Retry-After", "1")
	}
	b, _ := json.Marshal(wire.Error{Error: code, Reason: reason, Message: message})
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// badRequest answers 400 naming what is wrong with the request.
func badRequest(ctx *fasthttp.RequestCtx, err error) {
	respondError(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, err.Error())
}

// tooLarge answers 413 naming the limit.
func (s *Server) tooLarge(ctx *fasthttp.RequestCtx) {
	respondError(ctx, fasthttp.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge,
		"the body is larger than the limit: at most "+strconv.Itoa(s.opts.MaxBodyBytes)+" bytes")
}
