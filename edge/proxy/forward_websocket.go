package proxy

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/edge/upstream"
)

// WebSocket upgrades to the checkout API are carried through: the upgrade request goes upstream
// with its Connection and Upgrade headers (hop-by-hop, so removed from any other request), and
// when the checkout API answers 101 the client's connection is taken over (fasthttp's hijack)
// and joined to the upstream one until either side closes. The same limits hold as for any
// call: the client connection stays counted under the connection caps, the upstream one under
// VG_EDGE_MAX_CONNS, a tunnel through which no byte moved either way for the path's read timeout
// is closed (one side alone pushing keeps it open) and each write waits at most
// VG_EDGE_STREAM_SEND_TIMEOUT; the upgrade is counted in the metrics as
// any answer, with its status 101. Any other answer to an upgrade is relayed as it is.

var websocketToken = []byte("websocket")

// isWebSocketUpgrade reports whether the client asks to switch the connection to WebSocket.
func isWebSocketUpgrade(h *fasthttp.RequestHeader) bool {
	return h.ConnectionUpgrade() && bytes.EqualFold(bytes.TrimSpace(h.Peek(fasthttp.HeaderUpgrade)), websocketToken)
}

// askUpgrade puts back, on the request sent upstream, the upgrade hop-by-hop removal took.
func askUpgrade(req *fasthttp.Request) {
	req.Header.Set(fasthttp.HeaderConnection, "Upgrade")
	req.Header.SetBytesV(fasthttp.HeaderUpgrade, websocketToken)
}

// tunnel answers the client with the checkout API's 101 in up and joins the two connections
// until either closes, a write waits past the send timeout, the tunnel is idle (no byte either
// way) for the path's read timeout, or the call's total runs out.
func (p *Proxy) tunnel(ctx *fasthttp.RequestCtx, up *fasthttp.Response, c *upstream.Call, id []byte) {
	resp := &ctx.Response
	up.Header.CopyTo(&resp.Header)
	relayHeader(&resp.Header, id)
	resp.Header.Set(fasthttp.HeaderConnection, "Upgrade")
	resp.Header.SetBytesV(fasthttp.HeaderUpgrade, websocketToken)
	fasthttp.ReleaseResponse(up)
	if h, ok := ctx.Conn().(interface{ tunnelled() }); ok {
		h.tunnelled() // what follows are frames, not request headers
	}
	upConn, upReader := c.Takeover()
	idle, deadline, writeIdle := c.ReadIdle, c.Deadline, p.opts.WriteIdle
	c.ReadIdle = 0                      // the tunnel's watch bounds both directions together, not each read
	_ = upConn.SetDeadline(time.Time{}) // those of the upgrade's call
	ctx.Hijack(func(client net.Conn) {
		defer c.Release(false)
		_ = client.SetDeadline(time.Time{})
		// fasthttp closes the client's connection once this returns (its Close here does
		// nothing): a deadline now ends a read waiting on it.
		w := watchTunnel(idle, deadline, func() { _ = client.SetReadDeadline(time.Now()); _ = upConn.Close() })
		defer w.stop()
		toUpstream := make(chan struct{})
		go func() {
			defer close(toUpstream)
			_ = copyIdle(upConn, client, w, writeIdle)
			_ = upConn.Close() // the upstream's reads end too
		}()
		_ = copyIdle(client, upReader, w, writeIdle)
		_ = client.SetReadDeadline(time.Now())
		<-toUpstream
	})
}

// copyIdle copies src to dst until either fails, telling w of every byte that moved, each write
// bounded by writeIdle.
func copyIdle(dst net.Conn, src io.Reader, w *tunnelWatch, writeIdle time.Duration) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			w.moved()
			if writeIdle > 0 {
				_ = dst.SetWriteDeadline(time.Now().Add(writeIdle))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
	}
}

// tunnelWatch closes a tunnel once no byte has moved either way for idle (0: never), or at
// deadline (zero: none). A push-only stream keeps it open as long as it pushes.
type tunnelWatch struct {
	idle     time.Duration
	deadline time.Time
	close    func()
	last     atomic.Int64 // when a byte last moved, in Unix nanoseconds

	mu   sync.Mutex
	t    *time.Timer
	done bool
}

func watchTunnel(idle time.Duration, deadline time.Time, close func()) *tunnelWatch {
	w := &tunnelWatch{idle: idle, deadline: deadline, close: close}
	w.moved()
	if first := w.next(time.Now()); !first.IsZero() {
		w.mu.Lock()
		w.t = time.AfterFunc(time.Until(first), w.check)
		w.mu.Unlock()
	}
	return w
}

func (w *tunnelWatch) moved() { w.last.Store(time.Now().UnixNano()) }

// next is when the tunnel ends unless a byte moves first; zero: never.
func (w *tunnelWatch) next(now time.Time) time.Time {
	var at time.Time
	if w.idle > 0 {
		at = time.Unix(0, w.last.Load()).Add(w.idle)
	}
	if !w.deadline.IsZero() && (at.IsZero() || w.deadline.Before(at)) {
		at = w.deadline
	}
	return at
}

func (w *tunnelWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	now := time.Now()
	if at := w.next(now); now.Before(at) {
		w.t.Reset(at.Sub(now))
		return
	}
	w.close()
}

func (w *tunnelWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	if w.t != nil {
		w.t.Stop()
	}
}
