package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"vouchergate/edge/orderid"
	"vouchergate/edge/token"
	"vouchergate/shared/wire"
)

// Who may call, at the edge. With shoppers' tokens on (Options.Tokens):
//   - reservation, confirm, release and the quota paths need "Authorization: Bearer <JWT>",
//     verified (edge/token); else 401 with WWW-Authenticate. /healthz and /readyz need none;
//     the checkout API's paths are passed on as before, their Authorization unread and kept.
//     A reservation or dry run of a voucher held sold out or paused is answered from memory
//     before its token is checked, unless it is its holder's verified retry (reservingShopper).
//   - the token's shopper acts only as itself: its subject must be the reservation's
//     customerId, and every identity of a deduct, a check or a partial rollback, and the
//     identity a usage read asks about, must be the shopper's own (USER the subject, another type one of the values the
//     token carries in the claim VG_EDGE_JWT_IDENTITY_CLAIMS maps it to); else 403. The edge
//     sends the shopper to the backends in X-VG-Subject and X-VG-Identities, which they trust
//     only from a key with scope "edge" and hold every call to as well, keeping the shopper's
//     orderIds and idemKeys its own (backend/api/subject.go).
//
// Toward the backends, whatever the settings: a client's X-VG-Subject and X-VG-Identities never
// pass (headers.go);
// with a service key (Options.APIKey) Authorization is the edge's key; with tokens on and no
// key, the shopper's Authorization is removed. Either way a client's X-API-Key is removed too.

const (
	headerAuthorization = "Authorization"
	headerAPIKey        = "X-Api-Key"
	// HeaderSubject carries a verified token's subject to the backends.
	HeaderSubject = "X-Vg-Subject"
	// HeaderIdentities carries the token's other quota identities (wire.EncodeIdentities).
	HeaderIdentities = "X-Vg-Identities"
)

var bearerPrefix = []byte("bearer ")

// errNoBearer is verify's error for a request without a bearer token.
var errNoBearer = errors.New("no bearer token")

// authenticate verifies the request's bearer token and returns its shopper, or answers 401 and
// returns false.
func (p *Proxy) authenticate(ctx *fasthttp.RequestCtx) (*wire.Shopper, bool) {
	sh, err := p.verify(ctx)
	switch {
	case err == nil:
		return sh, true
	case errors.Is(err, errNoBearer):
		p.counts.tokensRefused.WithLabelValues("missing").Inc()
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="vouchergate"`)
		p.reject(ctx, fasthttp.StatusUnauthorized, wire.CodeUnauthorized, "a bearer token is required: Authorization: Bearer <JWT>")
	default:
		// err is one of edge/token's reasons, worded by the edge for the client.
		p.counts.tokensRefused.WithLabelValues(refusalLabel(err)).Inc()
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="vouchergate", error="invalid_token", error_description="`+err.Error()+`"`)
		p.reject(ctx, fasthttp.StatusUnauthorized, wire.CodeUnauthorized, err.Error())
	}
	return nil, false
}

// verify returns the shopper of the request's bearer token, answering nothing: errNoBearer
// without one, or edge/token's reason for a token that does not verify.
func (p *Proxy) verify(ctx *fasthttp.RequestCtx) (*wire.Shopper, error) {
	raw, ok := bearerToken(ctx.Request.Header.Peek(headerAuthorization))
	if !ok {
		return nil, errNoBearer
	}
	sh, err := p.opts.Tokens.Shopper(raw)
	if err != nil {
		return nil, err
	}
	return &sh, nil
}

// bearerToken returns the token of an "Authorization: Bearer <token>" value (the scheme in any
// case, RFC 9110 §11.1).
func bearerToken(v []byte) (string, bool) {
	if len(v) <= len(bearerPrefix) || !bytes.EqualFold(v[:len(bearerPrefix)], bearerPrefix) {
		return "", false
	}
	tok := bytes.TrimSpace(v[len(bearerPrefix):])
	return string(tok), len(tok) > 0
}

// refusalLabels name edge/token's reasons in vg_edge_tokens_refused_total.
var refusalLabels = []struct {
	err   error
	label string
}{
	{token.ErrMalformed, "malformed"}, {token.ErrSignature, "signature"}, {token.ErrExpired, "expired"},
	{token.ErrNotYetValid, "not_yet_valid"}, {token.ErrAudience, "audience"}, {token.ErrIssuer, "issuer"},
	{token.ErrClaimMissing, "claim_missing"}, {token.ErrSubject, "subject"}, {token.ErrCritical, "critical"},
}

func refusalLabel(err error) string {
	for _, r := range refusalLabels {
		if errors.Is(err, r.err) {
			return r.label
		}
	}
	return "other"
}

// forbid answers 403: the token is good, but not for this customer or identity.
func (p *Proxy) forbid(ctx *fasthttp.RequestCtx, message string) {
	p.counts.subjectRefused.Inc()
	p.reject(ctx, fasthttp.StatusForbidden, wire.CodeForbidden, message)
}

// reservationFor reads a reservation's body in full, as the backend does, and checks that its
// customerId is subject (42 and "42" are one customer). It answers 400 or 403 and returns
// false when not.
func (p *Proxy) reservationFor(ctx *fasthttp.RequestCtx, subject string) (wire.ReserveRequest, bool) {
	req, ok := orderid.DecodeRequest(ctx.Request.Body())
	if !ok {
		p.reject(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, "the body must be a JSON object with customerId, orderId and orderAmount")
		return req, false
	}
	if string(req.CustomerID) != subject {
		p.forbid(ctx, "customerId is not the token's subject")
		return req, false
	}
	return req, true
}

// quotaFor checks a quota call against the shopper: every identity of a deduct, a check or a
// partial rollback, and the identity a usage read names, must be its own. A whole rollback names
// no identity: its idemKey is the shopper's own at the backend. It answers 400 or 403 and
// returns false when the call may not go on.
func (p *Proxy) quotaFor(ctx *fasthttp.RequestCtx, sh *wire.Shopper) bool {
	var items []wire.QuotaItem
	switch string(ctx.Path()) {
	case "/quotas/deduct", "/quotas/check":
		var req wire.QuotaDeductRequest
		if !decodeStrict(ctx.Request.Body(), &req) {
			p.reject(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, "the body must be a JSON object with bizId, idemKey and items, nothing else")
			return false
		}
		items = req.Items
	case "/quotas/rollback":
		var req wire.QuotaRollbackRequest
		if !decodeStrict(ctx.Request.Body(), &req) {
			p.reject(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, "the body must be a JSON object with bizId and idemKey, and rollbackKey and items for a partial rollback, nothing else")
			return false
		}
		items = req.Items
	case "/quotas/usage":
		// The backend reads the first of repeated parameters, as Peek does.
		q := ctx.QueryArgs()
		if !sh.Owns(string(q.Peek("identityType")), string(q.Peek("identity"))) {
			p.forbid(ctx, "the identity asked about is not one the token carries")
			return false
		}
	}
	for _, it := range items {
		if !sh.Owns(it.IdentityType, it.Identity) {
			p.forbid(ctx, "the identity "+it.IdentityType+" of an item is not one the token carries")
			return false
		}
	}
	return true
}

// decodeStrict decodes a quota body into dst as strictly as the backend reads it: UTF-8, one
// object, unknown fields refused, keys matched without regard to case, the last of repeated
// keys taken. The backend's FuzzDecodeDeductMatchesEncodingJSON holds its deduct scanner to this
// same strict encoding/json decode, and its rollback is decoded so (api.decodeJSON, strict):
// both sides accept the same bodies and read the same identities.
func decodeStrict(body []byte, dst any) bool {
	if len(bytes.TrimSpace(body)) == 0 || !utf8.Valid(body) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return false
	}
	for _, c := range body[dec.InputOffset():] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// backendCredentials makes h, a request bound for a backend, carry the edge's credentials and
// the verified shopper, and none of the client's.
func (p *Proxy) backendCredentials(h *fasthttp.RequestHeader, sh *wire.Shopper) {
	switch {
	case p.apiKeyHeader != nil:
		h.Del(headerAPIKey)
		h.SetBytesV(headerAuthorization, p.apiKeyHeader)
	case p.opts.Tokens != nil:
		h.Del(headerAPIKey)
		h.Del(headerAuthorization)
	}
	if sh != nil {
		h.Set(HeaderSubject, sh.Subject)
		if len(sh.Identities) > 0 {
			h.Set(HeaderIdentities, wire.EncodeIdentities(sh.Identities))
		}
	}
}
