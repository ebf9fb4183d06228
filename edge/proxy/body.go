package proxy

import (
	"bytes"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/wire"
)

// The edge's server reads a request's body whole before the handler runs, but never more than
// its route's limit, and never a large one without a place in the body budget:
//   - HeaderReceived gives each request its route's limit (VG_MAX_BODY_BYTES for voucher and
//     quota paths, VG_EDGE_MAX_BODY_BYTES for the checkout API), so a body declared larger is
//     refused (413) before a byte of it is read, and a chunked one as soon as it passes the limit;
//   - a body larger than an API body (a checkout upload, or a chunked one that may become one) is
//     made to expect 100-continue, so that the server asks Expect before reading it. Expect takes
//     its size from the budget, or refuses it (503) when the budget is full; what it took is given
//     back when the server resets the request, whatever way the request ended (a bodyHold is
//     a user value, which fasthttp closes on reset).
//
// So the bodies in memory at once are at most the budget plus one API body per connection. An
// HTTP/1.1 client that did not ask for it gets a "100 Continue" before the answer, which RFC
// 9110 §15.2 requires it to accept. HTTP/1.0 has no 100-continue: its bodies are bounded to an
// API body's size. The sold-out answer reads its small body in one step, as a bare server does.

// budget bounds the bytes of the large bodies being read or forwarded at once. A request that
// does not fit is refused rather than made to wait: a client holding an upload open must not
// make others queue behind it. It is safe for concurrent use.
type budget struct {
	max  int64 // 0: no bound
	used atomic.Int64
}

// take reserves n bytes and reports whether they fitted.
func (b *budget) take(n int) bool {
	if b.max <= 0 {
		return true
	}
	for {
		used := b.used.Load()
		if used+int64(n) > b.max {
			return false
		}
		if b.used.CompareAndSwap(used, used+int64(n)) {
			return true
		}
	}
}

// give returns n bytes taken before.
func (b *budget) give(n int) {
	if b.max > 0 {
		b.used.Add(-int64(n))
	}
}

// bodyHold is a request's share of the budget, given back when fasthttp closes it with the
// request's other user values.
type bodyHold struct {
	from *budget
	n    int
}

func (h *bodyHold) Close() error {
	h.from.give(h.n)
	return nil
}

// bodyHoldKey is the user value under which a request keeps its bodyHold.
var bodyHoldKey = []byte("vouchergate.bodyHold")

// bodyLimit is the most a route's request body may hold.
func (p *Proxy) bodyLimit(r route) int {
	if r == routeCheckout {
		return p.opts.MaxBodyBytes
	}
	return p.opts.MaxAPIBodyBytes
}

// budgeted reports whether a body of declared length n (-1: chunked) under the given limit is
// large enough to need the budget, and the bytes it takes.
func (p *Proxy) budgeted(n, limit int) (int, bool) {
	switch {
	case n > p.opts.MaxAPIBodyBytes:
		return n, true
	case n == -1 && limit > p.opts.MaxAPIBodyBytes:
		return limit, true
	}
	return 0, false
}

// HeaderReceived runs when the server has read a request's header (use it as the server's
// HeaderReceived): it sets the request's body limit to its route's, and makes a large body
// expect 100-continue, so that Expect can refuse it or budget it before it is read.
func (p *Proxy) HeaderReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	limit := p.bodyLimit(routeOfTarget(h))
	if n := h.ContentLength(); n <= limit {
		if _, large := p.budgeted(n, limit); large {
			if h.IsHTTP11() {
				h.Set(fasthttp.HeaderExpect, "100-continue")
			} else {
				limit = p.opts.MaxAPIBodyBytes
			}
		}
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: limit}
}

// routeOfTarget is the route of the request's target, read as the server will read it. An
// origin-form target that normalizing cannot change (the usual one) is matched as it is.
func routeOfTarget(h *fasthttp.RequestHeader) route {
	if path, ok := plainPath(h.RequestURI()); ok {
		return matchPath(path).route
	}
	u := fasthttp.AcquireURI()
	defer fasthttp.ReleaseURI(u)
	if err := u.Parse(h.Host(), h.RequestURI()); err != nil {
		return routeCheckout // the largest limit; the server refuses the target next
	}
	return matchPath(u.Path()).route
}

// plainPath returns the path of an origin-form target that fasthttp's normalizing leaves as it
// is: only letters, digits, '-', '_' and single '/'.
func plainPath(target []byte) ([]byte, bool) {
	if i := bytes.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	if len(target) == 0 || target[0] != '/' || bytes.Contains(target, []byte("//")) {
		return nil, false
	}
	for _, c := range target {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '/') {
			return nil, false
		}
	}
	return target, true
}

// Expect answers a request with "Expect: 100-continue" before its body is read (use it as the
// server's ExpectHandler): a body larger than the route's limit gets 413, a large one the
// budget has no room for 503, both without being invited; any other gets 100 and is read.
func (p *Proxy) Expect(ctx *fasthttp.RequestCtx) int {
	n := ctx.Request.Header.ContentLength()
	limit := p.bodyLimit(matchPath(ctx.Path()).route)
	if n > limit {
		p.counts.rejectedRequest.Inc()
		answer(ctx, fasthttp.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge, "the body is larger than the limit")
		return fasthttp.StatusRequestEntityTooLarge
	}
	if size, large := p.budgeted(n, limit); large {
		if !p.bodies.take(size) {
			p.counts.bodyBudgetFull.Inc()
			p.counts.rejectedRequest.Inc()
			answer(ctx, fasthttp.StatusServiceUnavailable, wire.CodeUnavailable, "the edge is reading too many bodies; retry shortly")
			return fasthttp.StatusServiceUnavailable
		}
		ctx.SetUserValueBytes(bodyHoldKey, &bodyHold{from: &p.bodies, n: size})
	}
	return fasthttp.StatusContinue
}

// bodyFits answers 413 for a body larger than its route's limit, which HeaderReceived could
// only apply before the target was read in full, and reports whether the body fits.
func (p *Proxy) bodyFits(ctx *fasthttp.RequestCtx, r route) bool {
	if len(ctx.Request.Body()) <= p.bodyLimit(r) {
		return true
	}
	ctx.SetConnectionClose()
	p.reject(ctx, fasthttp.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge, "the body is larger than the limit")
	return false
}
