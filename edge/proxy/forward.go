package proxy

import (
	"bytes"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/wire"
)

// hopByHop are the headers that describe one connection, not the message (RFC 9110 §7.6.1),
// plus Expect: the edge has already read the whole body. Look-alikes with '_' for '-' are
// dropped too (headers.go).
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Expect",
}

const headerRequestID = "X-Request-Id"

// headers is what request and response headers share for removing hop-by-hop ones.
type headers interface {
	PeekAll(key string) [][]byte
	Del(key string)
	DelBytes(key []byte)
}

// stripHopByHop removes hop-by-hop headers, including those the Connection header names.
func stripHopByHop(h headers) {
	var named [8][]byte
	names := named[:0]
	for _, v := range h.PeekAll("Connection") {
		for tok := range bytes.SplitSeq(v, []byte{','}) {
			if tok = bytes.TrimSpace(tok); len(tok) > 0 {
				names = append(names, append([]byte(nil), tok...)) // the header's storage moves as we delete
			}
		}
	}
	for _, name := range names {
		h.DelBytes(name)
	}
	for _, name := range hopByHop {
		h.Del(name)
	}
}

// appendForwardedFor folds every X-Forwarded-For into one and appends the client's address.
func appendForwardedFor(h *fasthttp.RequestHeader, client net.Addr) {
	var buf [256]byte
	v := buf[:0]
	for _, prior := range h.PeekAll("X-Forwarded-For") {
		if prior = bytes.TrimSpace(prior); len(prior) > 0 {
			v = append(v, prior...)
			v = append(v, ", "...)
		}
	}
	if tcp, ok := client.(*net.TCPAddr); ok {
		v = tcp.AddrPort().Addr().Unmap().AppendTo(v)
	} else {
		v = append(v, "unknown"...)
	}
	h.Del("X-Forwarded-For")
	h.SetBytesV("X-Forwarded-For", v)
}

// requestID returns the client's request id when it is a sane one, or a new one written to buf.
func (p *Proxy) requestID(ctx *fasthttp.RequestCtx, buf []byte) []byte {
	if id := ctx.Request.Header.Peek(headerRequestID); validRequestID(id) {
		return id
	}
	buf = append(buf[:0], p.idPrefix...)
	return strconv.AppendUint(buf, p.idSeq.Add(1), 36)
}

// validRequestID accepts 1 to 128 bytes of letters, digits and -._:
func validRequestID(id []byte) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == ':') {
			return false
		}
	}
	return true
}

// call is where a request goes and what the edge adds to it.
type call struct {
	to      Doer // nil: the checkout API (forward_stream.go)
	timeout time.Duration
	backend bool          // bound for a backend: the edge's credentials replace the client's (auth.go)
	code    []byte        // a reservation's voucher: a 409 OUT_OF_STOCK passing through asks for its holders
	shopper *wire.Shopper // a verified token's shopper, sent in X-VG-Subject and X-VG-Identities
}

// toBackend is a call to the backend pool.
func (p *Proxy) toBackend(code []byte, shopper *wire.Shopper) call {
	return call{to: p.opts.Backends, timeout: p.opts.BackendTimeout, backend: true, code: code, shopper: shopper}
}

// forward sends the request as c says within its timeout and relays the answer, or a JSON
// 502, 503 or 504 when there is none. A call to the checkout API streams its answer (passThrough).
func (p *Proxy) forward(ctx *fasthttp.RequestCtx, c call) {
	var idBuf [64]byte
	id := p.requestID(ctx, idBuf[:0])

	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	if !p.upstreamRequest(ctx, req, c, id) {
		return
	}
	if c.to == nil {
		p.passThrough(ctx, req, id)
		return
	}
	resp := &ctx.Response
	if err := c.to.Do(req, resp, time.Now().Add(c.timeout)); err != nil {
		p.upstreamFailed(ctx, err, id)
		return
	}
	relayHeader(&resp.Header, id)
	if c.code != nil && resp.StatusCode() == fasthttp.StatusConflict && bytes.Contains(resp.Body(), outOfStockCode) {
		p.counts.learnedFrom409.Inc()
		// With a live entry, this was an order taken for a holder (a false positive of the
		// filter, or a released holder): the entry's own refresh keeps it current.
		if e, _ := p.opts.SoldOut.Lookup(c.code, ctx.Time()); e == nil {
			p.opts.Refresher.Ask(string(c.code))
		}
	}
}

// upstreamRequest makes req the request to send upstream: the client's, with clean headers and
// the edge's own, or answers the client and returns false.
func (p *Proxy) upstreamRequest(ctx *fasthttp.RequestCtx, req *fasthttp.Request, c call, id []byte) bool {
	// Everything but the body is copied; the body, read once by readBody, is sent as it is.
	ctx.Request.Header.CopyTo(&req.Header)
	ctx.Request.URI().CopyTo(req.URI())
	req.SetBodyRaw(ctx.Request.Body())
	if status, code, message := p.upstreamHeader(ctx, &req.Header); status != 0 {
		p.reject(ctx, status, code, message)
		return false
	}
	// Hop-by-hop headers first, then the edge's own: a client's Connection header may name
	// X-Forwarded-Proto or Host, and must not take them away.
	stripHopByHop(&req.Header)
	p.forwardingHeaders(ctx, &req.Header)
	req.Header.SetBytesV(headerRequestID, id)
	if c.backend {
		p.backendCredentials(&req.Header, c.shopper)
	}
	if status, code, message := p.checkHeaderSize(req); status != 0 {
		p.reject(ctx, status, code, message)
		return false
	}
	return true
}

// upstreamFailed answers a call that got no answer.
func (p *Proxy) upstreamFailed(ctx *fasthttp.RequestCtx, err error, id []byte) {
	ctx.Response.Reset()
	status, errCode, message := upstreamFailure(err)
	p.counts.upstreamError(status)
	if p.errLog.allow() && status != statusClientGone {
		p.log.Warn("upstream call failed", "path", string(ctx.Path()), "status", status, "err", err, "requestId", string(id))
	}
	answer(ctx, status, errCode, message)
	ctx.Response.Header.SetBytesV(headerRequestID, id)
	if status == statusClientGone {
		ctx.SetConnectionClose()
	}
}

// relayHeader makes an upstream answer's header fit to relay to the client.
func relayHeader(h *fasthttp.ResponseHeader, id []byte) {
	stripHopByHop(h)
	h.ResetConnectionClose() // the client's connection is the server's to manage
	h.SetBytesV(headerRequestID, id)
}

var outOfStockCode = []byte(`"OUT_OF_STOCK"`)
