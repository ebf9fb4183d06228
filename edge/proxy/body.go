package proxy

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/wire"
)

// The edge's server streams request bodies (fasthttp's StreamRequestBody): fasthttp reads the
// header and at most 8 KB of the body before the handler runs, and the handler reads the rest
// itself, knowing the route's limit. So a body is refused from its Content-Length before it is
// read, or as soon as a chunked one passes the limit; never after a megabyte was read for a
// route that takes 8 KB. A body is read once, into a buffer the upstream request then sends
// as it is.

// budget bounds the bytes of the bodies being read or forwarded at once. A request that does
// not fit is refused rather than made to wait: a client holding an upload open must not make
// others queue behind it. It is safe for concurrent use.
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

// apiBodies holds buffers of MaxAPIBodyBytes for voucher and quota bodies, so that reading
// one allocates nothing on the sold-out path.
type apiBodies struct {
	size int
	pool sync.Pool // of *[]byte with cap size
}

func (a *apiBodies) get() *[]byte {
	if b, ok := a.pool.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, a.size)
	return &b
}

func (a *apiBodies) put(b *[]byte) {
	*b = (*b)[:0]
	a.pool.Put(b)
}

// heldBody is what readBody leaves to give back once the request is answered.
type heldBody struct {
	api   *[]byte // a pooled API buffer, or nil
	taken int     // bytes taken from the budget
}

// release gives back what h holds. The request's body must not be used afterwards.
func (p *Proxy) release(h heldBody) {
	if h.api != nil {
		p.apiBodies.put(h.api)
	}
	p.bodies.give(h.taken)
}

// readBody reads the request's body, at most limit bytes, into memory as the request's body.
// A body over the limit gets 413, one the budget has no room for 503 (when budgeted), one that
// cannot be read (cut short, too slow) 400 or 408; each closes the connection, as the rest of
// the body may still be on the way. The caller releases what it returns once answered.
func (p *Proxy) readBody(ctx *fasthttp.RequestCtx, limit int, budgeted bool) (heldBody, bool) {
	var held heldBody
	stream := ctx.RequestBodyStream()
	if stream == nil { // a server that read the body already, as tests calling Handle have
		if len(ctx.Request.Body()) > limit {
			p.tooLarge(ctx)
			return held, false
		}
		return held, true
	}
	length := ctx.Request.Header.ContentLength() // -1: chunked
	if length > limit {
		p.tooLarge(ctx)
		return held, false
	}
	size := length
	if length < 0 {
		size = limit
	}
	if budgeted {
		if !p.bodies.take(size) {
			p.counts.bodyBudgetFull.Inc()
			ctx.SetConnectionClose()
			p.reject(ctx, fasthttp.StatusServiceUnavailable, wire.CodeUnavailable, "the edge is reading too many bodies; retry shortly")
			return held, false
		}
		held.taken = size
	}
	var buf []byte
	if size <= p.apiBodies.size {
		held.api = p.apiBodies.get()
		buf = *held.api
	} else {
		buf = make([]byte, 0, size+1) // one byte more: a chunked body's extra byte shows it is too large
	}
	buf, err := readAtMost(stream, buf, limit, length)
	if held.api != nil {
		*held.api = buf[:0] // the same array, kept for the pool
	}
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		p.release(held)
		p.tooLarge(ctx)
		return heldBody{}, false
	case err != nil:
		p.release(held)
		ctx.SetConnectionClose()
		p.ReadFailure(ctx, err)
		return heldBody{}, false
	}
	ctx.Request.SetBodyRaw(buf)
	return held, true
}

// readAtMost appends to buf the body from stream: length bytes, or for a chunked body (length
// -1) all of it, failing with fasthttp.ErrBodyTooLarge once it has more than limit bytes.
func readAtMost(stream io.Reader, buf []byte, limit, length int) ([]byte, error) {
	if length >= 0 {
		buf = buf[:length]
		_, err := io.ReadFull(stream, buf)
		return buf, err
	}
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return buf, fasthttp.ErrBodyTooLarge
			}
			buf = append(buf, 0)[:len(buf)] // grow; never past limit+1 bytes read
		}
		n, err := stream.Read(buf[len(buf):min(cap(buf), limit+1)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return buf, fasthttp.ErrBodyTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// tooLarge answers 413 and closes the connection, whose unread body may still be coming.
func (p *Proxy) tooLarge(ctx *fasthttp.RequestCtx) {
	ctx.SetConnectionClose()
	p.reject(ctx, fasthttp.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge, "the body is larger than the limit")
}

// bodyLimit is the most a route's request body may hold.
func (p *Proxy) bodyLimit(r route) int {
	if r == routeCheckout {
		return p.opts.MaxBodyBytes
	}
	return p.opts.MaxAPIBodyBytes
}

// HeaderReceived runs when the server has read a request's header (use it as the server's
// HeaderReceived). A request that declares a body larger than its route takes is made to expect
// 100-continue, so that Expect refuses it (413) before a byte of the body is read: the server
// would otherwise wait for the first 8 KB of it before the handler could refuse it. The route is
// taken from the raw target only when normalizing cannot change it; otherwise the largest limit
// applies here and the handler applies the route's.
func (p *Proxy) HeaderReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if n := h.ContentLength(); n > p.opts.MaxAPIBodyBytes && h.IsHTTP11() {
		limit := p.opts.MaxBodyBytes
		if path, ok := plainPath(h.RequestURI()); ok {
			limit = p.bodyLimit(matchPath(path).route)
		}
		if n > limit {
			h.Set(fasthttp.HeaderExpect, "100-continue")
		}
	}
	return fasthttp.RequestConfig{}
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

// Expect answers a request with "Expect: 100-continue" before its body is sent: 100 lets the
// client send it; a body larger than the route's limit gets 413 without being invited. Use it
// as the server's ExpectHandler.
func (p *Proxy) Expect(ctx *fasthttp.RequestCtx) int {
	if ctx.Request.Header.ContentLength() > p.bodyLimit(matchPath(ctx.Path()).route) {
		p.counts.rejectedRequest.Inc()
		answer(ctx, fasthttp.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge, "the body is larger than the limit")
		return fasthttp.StatusRequestEntityTooLarge
	}
	return fasthttp.StatusContinue
}
