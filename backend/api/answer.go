package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strconv"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/wire"
)

// marshal is json.Marshal without its HTML escaping: an answer is JSON for a client, never
// HTML, and "send Authorization: Bearer <VG_ADMIN_TOKEN>" must not read \u003cVG_ADMIN_TOKEN\u003e.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// respondJSON answers status with v as JSON.
func respondJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := marshal(v)
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
	b, _ := marshal(wire.Error{Error: code, Reason: reason, Message: message})
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

// failureKind is the kind a failed request's log line is sampled by: its level, method and the
// shape of its path (first segment and number of segments: /vouchers/*/reservations), never
// its codes or ids, so the kinds stay as few as the routes.
func failureKind(level slog.Level, ctx *fasthttp.RequestCtx) string {
	path := ctx.Path()
	first, _, _ := bytes.Cut(bytes.TrimPrefix(path, []byte("/")), []byte("/"))
	return level.String() + " " + string(ctx.Method()) + " /" + string(first) + " " + strconv.Itoa(bytes.Count(path, []byte("/")))
}
