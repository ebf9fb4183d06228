package proxy

import (
	"bytes"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/edge/upstream"
)

// WebSocket upgrades to the checkout API are carried through: the upgrade request goes upstream
// with its Connection and Upgrade headers (hop-by-hop, so removed from any other request), and
// when the checkout API answers 101 the client's connection is taken over (fasthttp's hijack)
// and joined to the upstream one until either side closes. The same limits hold as for any
// call: the client connection stays counted under the connection caps, the upstream one under
// VG_EDGE_MAX_CONNS, each read waits at most the path's read timeout (an idle tunnel is closed)
// and each write at most VG_EDGE_STREAM_SEND_TIMEOUT; the upgrade is counted in the metrics as
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

// tunnel answers the client with the checkout API's 101 in up and joins the two connections.
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
	readIdle, writeIdle := c.ReadIdle, p.opts.WriteIdle
	ctx.Hijack(func(client net.Conn) {
		defer c.Release(false)
		toUpstream := make(chan struct{})
		go func() {
			defer close(toUpstream)
			_ = copyIdle(upConn, client, client, readIdle, writeIdle)
			_ = upConn.Close() // the upstream's reads end too
		}()
		_ = copyIdle(client, upReader, nil, 0, writeIdle) // upstream reads are bounded by the call
		_ = client.Close()
		<-toUpstream
	})
}

// copyIdle copies src to dst until either fails, each read bounded by readIdle (on readConn,
// if given) and each write by writeIdle.
func copyIdle(dst net.Conn, src io.Reader, readConn net.Conn, readIdle, writeIdle time.Duration) error {
	buf := make([]byte, 32<<10)
	for {
		if readConn != nil && readIdle > 0 {
			_ = readConn.SetReadDeadline(time.Now().Add(readIdle))
		}
		n, err := src.Read(buf)
		if n > 0 {
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
