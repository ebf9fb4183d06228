package proxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/edge/upstream"
)

// The checkout API's answers stream through the edge: the header goes to the client as soon as
// it is read, and the body as it arrives, through the server's own buffer, so the memory an
// answer takes is bounded by buffers, not by its size. Each read from the checkout API waits at
// most its path's read timeout (upstream.PathTimeout) and each write to the client at most the
// write timeout, so a long poll, a server-sent event stream and a slow reader all last as long
// as bytes keep moving. A client that goes away cuts its call, while it waits for the answer and
// while the answer streams, silent or not: the edge asks the client's socket every
// clientCheckEvery whether the client's FIN or RST came.

// smallAnswer is the largest answer of known length read whole before it is relayed: a
// checkout API cut in the middle of one still gets the client a clean 502, not a cut answer.
const smallAnswer = 64 << 10

// clientCheckEvery is how often a call waiting for its answer asks whether its client is
// still there.
const clientCheckEvery = 200 * time.Millisecond

// errAnswerTooLarge is an answer past the configured cap (Options.MaxCheckoutAnswer).
var errAnswerTooLarge = errors.New("answer larger than the limit")

// passThrough sends req to the checkout API and streams its answer to the client.
func (p *Proxy) passThrough(ctx *fasthttp.RequestCtx, req *fasthttp.Request, id []byte) {
	upgrade := isWebSocketUpgrade(&ctx.Request.Header)
	if upgrade {
		askUpgrade(req)
	}
	c := p.opts.Checkout.NewCall(ctx.Path(), ctx.Time())
	up := fasthttp.AcquireResponse()
	stop := p.watchClient(ctx, c)
	err := p.opts.Checkout.Do(req, up, c)
	if err != nil {
		stop()
		fasthttp.ReleaseResponse(up)
		p.upstreamFailed(ctx, err, id)
		return
	}
	if upgrade && up.StatusCode() == fasthttp.StatusSwitchingProtocols {
		stop()
		p.tunnel(ctx, up, c, id)
		return
	}
	if err := p.relay(ctx, up, c, id, stop); err != nil {
		stop()
		c.Release(false)
		fasthttp.ReleaseResponse(up)
		p.upstreamFailed(ctx, err, id)
	}
}

// relay gives the client the answer whose header is in up, or returns the error to answer
// instead when none of it went out. Once the body is relayed, its stream's Close releases up
// and the call, and stops the client's watch (stop); an answer relayed whole stops it at once.
func (p *Proxy) relay(ctx *fasthttp.RequestCtx, up *fasthttp.Response, c *upstream.Call, id []byte, stop func()) error {
	body := up.BodyStream()
	n := up.Header.ContentLength()
	switch limit := p.opts.MaxCheckoutAnswer; {
	case body == nil: // HEAD, 1xx, 204, 304
	case limit > 0 && n > limit:
		return errAnswerTooLarge
	case n >= 0 && n <= smallAnswer:
		b := make([]byte, n)
		if _, err := io.ReadFull(body, b); err != nil {
			return err
		}
		up.CloseBodyStream() //nolint:errcheck // a stream read to its end closes cleanly
		c.Release(true)
		body = nil
		ctx.Response.SetBodyRaw(b)
	}
	resp := &ctx.Response
	skip := up.SkipBody
	up.Header.CopyTo(&resp.Header)
	relayHeader(&resp.Header, id)
	if body == nil {
		if skip { // HEAD: the header says the length of a body it does not carry
			resp.SkipBody = true
		}
		stop()
		c.Release(true)
		fasthttp.ReleaseResponse(up)
		return nil
	}
	size := n
	if size < 0 {
		size = -1 // chunked, or until the checkout API closed: chunked to the client
	}
	resp.ImmediateHeaderFlush = true
	resp.SetBodyStream(&relayBody{
		ctx: ctx, src: body, up: up, call: c, stopWatch: stop, writeIdle: p.opts.WriteIdle,
		capped: p.opts.MaxCheckoutAnswer > 0, left: int64(p.opts.MaxCheckoutAnswer), reuse: n >= -1,
	}, size)
	return nil
}

// relayBody is an answer's body on its way from the checkout API to the client. The server
// reads it and writes each piece to the client before reading the next, so each Read renews
// the client's write deadline for the piece it returns.
type relayBody struct {
	ctx       *fasthttp.RequestCtx
	src       io.Reader
	up        *fasthttp.Response
	call      *upstream.Call
	stopWatch func() // of the client's watch, which runs while the body does
	writeIdle time.Duration
	capped    bool
	left      int64 // bytes the cap still allows
	reuse     bool  // the body has an end of its own: the connection may carry the next call
	ended     bool
}

func (r *relayBody) Read(b []byte) (int, error) {
	n, err := r.src.Read(b)
	if r.capped {
		if r.left -= int64(n); r.left < 0 {
			return 0, errAnswerTooLarge
		}
	}
	if err == io.EOF {
		r.ended = true
	}

	if r.writeIdle > 0 {
		_ = r.ctx.SetWriteDeadline(time.Now().Add(r.writeIdle))
	}
	return n, err
}

// Close releases the call: its connection is kept when the body was read to its end.
func (r *relayBody) Close() error {
	if r.up == nil {
		return nil
	}
	r.stopWatch()
	_ = r.up.CloseBodyStream()
	r.call.Release(r.ended && r.reuse)
	fasthttp.ReleaseResponse(r.up)
	r.up = nil
	return nil
}

// watchClient cuts c when the client goes away while c waits for its answer or streams it,
// asking every clientCheckEvery; it returns the function that stops watching (once or more).
func (p *Proxy) watchClient(ctx *fasthttp.RequestCtx, c *upstream.Call) (stop func()) {
	conn := clientSocket(ctx.Conn())
	if conn == nil {
		return func() {}
	}
	w := &clientWatch{conn: conn, call: c}
	w.mu.Lock()
	w.t = time.AfterFunc(clientCheckEvery, w.check)
	w.mu.Unlock()
	return w.stop
}

// clientWatch asks, while a call waits, whether its client is still there.
type clientWatch struct {
	conn net.Conn
	call *upstream.Call
	mu   sync.Mutex
	t    *time.Timer
	done bool
}

func (w *clientWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	if upstream.PeerGone(w.conn) {
		w.call.Abort()
		return
	}
	w.t.Reset(clientCheckEvery)
}

func (w *clientWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	w.t.Stop()
}

// clientSocket is the client's connection under the edge's wrappers (ClientListener).
func clientSocket(c net.Conn) net.Conn {
	switch h := c.(type) {
	case *headConn:
		return h.Conn
	case *tlsHeadConn:
		return h.Conn
	}
	return c
}
