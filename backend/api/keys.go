package api

import (
	"bytes"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"vouchergate/backend/apikeys"
	"vouchergate/shared/wire"
)

// Service API keys (VG_API_KEYS_FILE). When keys are configured every route with scopes needs a
// key with one of them:
//
//   - the key comes in X-API-Key, or else in Authorization: Bearer. X-API-Key is read first so
//     that a caller forwarding an end user's own bearer token (the edge) can send its key beside it;
//   - no key, or one not in the file: 401 UNAUTHORIZED with WWW-Authenticate;
//   - a key without the route's scope: 403 FORBIDDEN;
//   - X-VG-Subject from a key without scope edge, or with no keys configured: 403 (subject.go).
//
// Refusals are counted by reason in vouchergate_api_key_refusals_total (and by route and code in
// vouchergate_http_requests_total). Neither the key nor its digest is ever logged or answered.

// Reasons a request is refused, the values of the refusals' reason label.
const (
	refusedMissing   = "missing"           // no key sent
	refusedUnknown   = "unknown"           // a key no file entry has
	refusedScope     = "scope"             // a key without the route's scope
	refusedUntrusted = "subject_untrusted" // X-VG-Subject from a key without scope edge
	refusedSubject   = "subject_mismatch"  // the subject is not the order's or identity's (subject.go)
)

// keyRefusals counts refused requests by reason; children made once, so counting allocates
// nothing.
type keyRefusals map[string]prometheus.Counter

func newKeyRefusals(reg prometheus.Registerer) keyRefusals {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vouchergate_api_key_refusals_total",
		Help: "Requests refused for their service API key or X-VG-Subject, by reason (missing, unknown, scope, subject_untrusted, subject_mismatch)."},
		[]string{"reason"})
	if reg != nil {
		reg.MustRegister(v)
	}
	out := keyRefusals{}
	for _, r := range []string{refusedMissing, refusedUnknown, refusedScope, refusedUntrusted, refusedSubject} {
		out[r] = v.WithLabelValues(r)
	}
	return out
}

var bearer = []byte("Bearer ")

// presentedKey returns the key the request carries, or nil.
func presentedKey(h *fasthttp.RequestHeader) []byte {
	if k := h.Peek("X-API-Key"); len(k) > 0 {
		return k
	}
	auth := h.Peek("Authorization")
	if len(auth) > len(bearer) && bytes.EqualFold(auth[:len(bearer)], bearer) {
		return bytes.TrimSpace(auth[len(bearer):])
	}
	return nil
}

// permit checks the request's key against the route's scopes and, when it may name one, reads
// the shopper the request acts for into p.shopper. It answers the refusal and returns false
// when the request may not go on.
func (s *Server) permit(ctx *fasthttp.RequestCtx, e *endpoint, p *params) bool {
	if e.scopes == 0 {
		return true
	}
	subject := ctx.Request.Header.Peek(SubjectHeader)
	if s.opts.Keys == nil {
		if len(subject) > 0 {
			return s.refuse(ctx, refusedUntrusted, fasthttp.StatusForbidden, wire.CodeForbidden,
				SubjectHeader+" is trusted only from a service key with scope edge, and VG_API_KEYS_FILE is not set")
		}
		return true
	}
	secret := presentedKey(&ctx.Request.Header)
	if secret == nil {
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="vouchergate"`)
		return s.refuse(ctx, refusedMissing, fasthttp.StatusUnauthorized, wire.CodeUnauthorized,
			"send a service API key: X-API-Key: <key> or Authorization: Bearer <key>")
	}
	key, ok := s.opts.Keys.Lookup(secret)
	if !ok {
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="vouchergate", error="invalid_token"`)
		return s.refuse(ctx, refusedUnknown, fasthttp.StatusUnauthorized, wire.CodeUnauthorized, "the API key is not known")
	}
	if key.Scopes&e.scopes == 0 {
		return s.refuse(ctx, refusedScope, fasthttp.StatusForbidden, wire.CodeForbidden,
			"the API key "+key.Name+" may not call this route: it needs scope "+e.scopes.String())
	}
	if len(subject) > 0 {
		if key.Scopes&apikeys.Edge == 0 {
			return s.refuse(ctx, refusedUntrusted, fasthttp.StatusForbidden, wire.CodeForbidden,
				SubjectHeader+" is trusted only from a service key with scope edge; the API key "+key.Name+" has not")
		}
		p.shopper = &wire.Shopper{Subject: string(subject),
			Identities: wire.DecodeIdentities(string(ctx.Request.Header.Peek(IdentitiesHeader)))}
	}
	return true
}

// refuse answers a refusal and counts it under reason; it returns false, for permit.
func (s *Server) refuse(ctx *fasthttp.RequestCtx, reason string, status int, code, message string) bool {
	s.refusals[reason].Inc()
	respondError(ctx, status, code, message)
	return false
}
