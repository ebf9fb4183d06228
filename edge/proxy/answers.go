package proxy

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/valyala/fasthttp"

	"vouchergate/edge/upstream"
	"vouchergate/shared/wire"
)

// Error codes the edge adds to wire's, for answers only a gateway gives.
const (
	CodeBadGateway     = "BAD_GATEWAY"
	CodeGatewayTimeout = "GATEWAY_TIMEOUT"
	CodeHeaderTooLarge = "HEADER_TOO_LARGE"
	CodeRequestTimeout = "REQUEST_TIMEOUT"
	CodeClientGone     = "CLIENT_CLOSED_REQUEST"
)

var (
	contentTypeJSON = []byte("application/json")
	soldOutBody     = []byte(`{"error":"` + wire.CodeOutOfStock + `"}`)
	// soldOutValidBody is wire.ValidateResponse for a sold-out voucher.
	soldOutValidBody = []byte(`{"valid":false,"error":"` + wire.CodeOutOfStock + `"}`)
)

// answer writes a JSON error. Messages are the edge's own words, never an error's text. They are
// not HTML-escaped: an answer is JSON for a client, never HTML, and "Authorization: Bearer <JWT>"
// must not read \u003cJWT\u003e.
func answer(ctx *fasthttp.RequestCtx, status int, code, message string) {
	if status == fasthttp.StatusServiceUnavailable {
		ctx.Response.Header.Set("Retry-After", "1")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(wire.Error{Error: code, Message: message}) // strings alone: it cannot fail
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// answerSoldOut writes the 409 for a sold-out voucher. It does not allocate.
func answerSoldOut(ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(fasthttp.StatusConflict)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBodyRaw(soldOutBody)
}

// answerSoldOutValidate writes the dry run's answer for a sold-out voucher: 200, not valid,
// OUT_OF_STOCK, what the backend would answer. It does not allocate.
func answerSoldOutValidate(ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBodyRaw(soldOutValidBody)
}

// statusClientGone is what a call cancelled because its client went away counts as (nginx's
// 499): nobody reads the answer.
const statusClientGone = 499

// upstreamFailure maps a failed call to its answer.
func upstreamFailure(err error) (status int, code, message string) {
	switch {
	case errors.Is(err, upstream.ErrClientGone):
		return statusClientGone, CodeClientGone, "the client went away"
	case errors.Is(err, upstream.ErrNoBackend):
		return fasthttp.StatusServiceUnavailable, wire.CodeUnavailable, "no backend is available; retry shortly"
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		return fasthttp.StatusServiceUnavailable, wire.CodeUnavailable, "the upstream is busy; retry shortly"
	case upstream.TimedOut(err):
		return fasthttp.StatusGatewayTimeout, CodeGatewayTimeout, "the upstream did not answer in time"
	case upstream.Refused(err):
		return fasthttp.StatusBadGateway, CodeBadGateway, "the upstream could not be reached"
	case errors.Is(err, fasthttp.ErrBodyTooLarge), errors.Is(err, errAnswerTooLarge):
		return fasthttp.StatusBadGateway, CodeBadGateway, "the upstream's answer is larger than the limit"
	case errors.As(err, new(*fasthttp.ErrSmallBuffer)):
		return fasthttp.StatusBadGateway, CodeBadGateway, "the upstream's answer header is larger than the limit"
	}
	return fasthttp.StatusBadGateway, CodeBadGateway, "the upstream's answer was cut short or malformed"
}

// readFailure answers a request fasthttp could not read (the server's ErrorHandler).
func readFailure(ctx *fasthttp.RequestCtx, err error) {
	var headerTooLarge *fasthttp.ErrSmallBuffer
	var timeout interface{ Timeout() bool }
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		answer(ctx, fasthttp.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge, "the body is larger than the limit")
	case errors.As(err, &headerTooLarge):
		answer(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge, CodeHeaderTooLarge, "the request header is larger than the limit")
	case errors.As(err, &timeout) && timeout.Timeout():
		answer(ctx, fasthttp.StatusRequestTimeout, CodeRequestTimeout, "the request was not read in time")
	default:
		answer(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, "malformed HTTP request")
	}
}
