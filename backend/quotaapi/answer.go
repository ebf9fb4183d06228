package quotaapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/quota"
	"vouchergate/shared/wire"
)

// body returns the request body, or answers 413 or 400 and returns false.
func (h *Handlers) body(ctx *fasthttp.RequestCtx) ([]byte, bool) {
	body := ctx.PostBody()
	if len(body) > h.maxBody {
		h.error(ctx, fasthttp.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge,
			fmt.Sprintf("the body is %d bytes; at most %d", len(body), h.maxBody))
		return nil, false
	}
	if len(body) == 0 {
		h.error(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, "a JSON body is required")
		return nil, false
	}
	if !utf8.Valid(body) {
		// encoding/json would quietly turn bad bytes into U+FFFD, merging distinct identities
		h.error(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, "the body is not valid UTF-8")
		return nil, false
	}
	return body, true
}

// decodeWith reads the body with a decoder of decode.go, or answers 400, 413 and returns false.
func decodeWith[T any](h *Handlers, ctx *fasthttp.RequestCtx, dst *T, decode func([]byte, *T) error) bool {
	body, ok := h.body(ctx)
	if !ok {
		return false
	}
	if err := decode(body, dst); err != nil {
		h.error(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, err.Error())
		return false
	}
	return true
}

// decode reads the body into dst with encoding/json, refusing unknown fields and trailing
// data, or answers 400 or 413 and returns false. For bodies off the hot path.
func (h *Handlers) decode(ctx *fasthttp.RequestCtx, dst any) bool {
	body, ok := h.body(ctx)
	if !ok {
		return false
	}
	if err := decodeJSON(body, dst); err != nil {
		h.error(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, jsonProblem(err))
		return false
	}
	return true
}

func decodeJSON(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	} else if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("data after the JSON object")
		}
	}
	return err
}

// jsonProblem says what is wrong with a body in terms of its fields.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		if te.Field == "" {
			return "the body must be a JSON object"
		}
		return fmt.Sprintf("%s must not be %s; expected %s", te.Field, te.Value, jsonKind(te.Type.String()))
	case errors.As(err, &se):
		return fmt.Sprintf("the body is not valid JSON (at byte %d)", se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the body is not valid JSON (it ends early)"
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return "unknown field " + f
	}
	if strings.Contains(msg, "parsing time") {
		return "times must be RFC 3339, e.g. \"2025-11-11T00:00:00+08:00\""
	}
	return "the body is not valid: " + strings.TrimPrefix(msg, "json: ")
}

func jsonKind(goType string) string {
	switch goType {
	case "int64", "*int64":
		return "an integer"
	case "string":
		return "a string"
	case "[]string":
		return "an array of strings"
	case "[]wire.QuotaItem":
		return "an array of items"
	case "time.Time", "*time.Time":
		return "an RFC 3339 time"
	}
	return "an object"
}

// json answers status with v as JSON.
func (h *Handlers) json(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		h.log.Error("quotaapi: encode answer", "err", err)
		h.error(ctx, fasthttp.StatusInternalServerError, wire.CodeInternal, "")
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func (h *Handlers) error(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	h.json(ctx, status, &wire.Error{Error: code, Message: msg})
}

// fail maps a service outcome to its answer: the one place where quota errors become codes.
func (h *Handlers) fail(ctx *fasthttp.RequestCtx, err error) {
	var ex *quota.ExceededError
	switch {
	case errors.As(err, &ex):
		h.json(ctx, fasthttp.StatusConflict, &wire.QuotaExceeded{Error: wire.CodeQuotaExceeded,
			Message: ex.Error(), Counter: counterWire(&ex.Counter), Requested: ex.Requested})
	case errors.Is(err, quota.ErrInvalid):
		h.error(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, err.Error())
	case errors.Is(err, quota.ErrRolledBack):
		h.error(ctx, fasthttp.StatusConflict, wire.CodeQuotaRolledBack, "this idemKey was rolled back; use a new one")
	case errors.Is(err, quota.ErrIdemKeyReused):
		h.error(ctx, fasthttp.StatusConflict, wire.CodeIdemKeyReused, "this idemKey deducted other items for the same identity")
	case errors.Is(err, quota.ErrRuleNotFound):
		h.error(ctx, fasthttp.StatusNotFound, wire.CodeQuotaRuleNotFound, "no quota rule has this id")
	case errors.Is(err, quota.ErrTooManyRules):
		h.error(ctx, fasthttp.StatusConflict, wire.CodeTooManyQuotaRules,
			fmt.Sprintf("a bizId and identityType hold at most %d rules", wire.MaxQuotaRulesPerType))
	case errors.Is(err, quota.ErrUnavailable):
		h.log.Warn("quotaapi: unavailable", "err", err)
		ctx.Response.Header.Set("Retry-After", "1")
		h.error(ctx, fasthttp.StatusServiceUnavailable, wire.CodeUnavailable, "try again with the same idemKey")
	default:
		h.log.Error("quotaapi: unexpected", "err", err)
		h.error(ctx, fasthttp.StatusInternalServerError, wire.CodeInternal, "")
	}
}

func counterWire(c *quota.Counter) wire.QuotaCounter {
	out := wire.QuotaCounter{IdentityType: c.IdentityType, Identity: c.Identity, Dimension: c.Dimension,
		Window: windowWire(c.Window), Used: c.Used, Limit: c.Limit}
	if !c.ResetsAt.IsZero() {
		t := c.ResetsAt
		out.ResetsAt = &t
	}
	return out
}

func windowWire(w quota.Window) wire.QuotaWindow {
	out := wire.QuotaWindow{Type: string(w.Type), Timezone: w.Timezone}
	switch w.Type {
	case quota.Rolling:
		out.Size = formatSize(w.Size)
	case quota.Fixed:
		start, end := w.Start.UTC(), w.End.UTC()
		out.Start, out.End = &start, &end
	}
	return out
}
