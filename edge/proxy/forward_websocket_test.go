package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"vouchergate/testkit"
)

// A WebSocket echo through the edge, to a checkout API process of its own: the upgrade reaches
// it with its headers, the 101 comes back, and frames go both ways on the joined connections.
// (Before: Upgrade and Connection were stripped, the upstream saw a plain GET, the client got
// its 426.)
func TestWebSocketEchoThroughTheEdge(t *testing.T) {
	up := testkit.StartCheckoutStandIn(t, 0)
	e := passThroughEdge(t, up.Addr, edgeConfig{})
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	const key = "dGhlIHNhbXBsZSBub25jZQ=="
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: shop.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", key)
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != testkit.WebSocketAccept(key) ||
		resp.Header.Get("Upgrade") != "websocket" || resp.Header.Get("Connection") != "Upgrade" {
		t.Fatalf("upgrade answered %d %v", resp.StatusCode, resp.Header)
	}
	for _, msg := range []string{"hello", "second message"} {
		if _, err := conn.Write(testkit.WebSocketTextFrame([]byte(msg), []byte{1, 2, 3, 4})); err != nil {
			t.Fatal(err)
		}
		got, err := testkit.ReadWebSocketFrame(r)
		if err != nil || string(got) != "echo: "+msg {
			t.Fatalf("echo of %q: %q, %v", msg, got, err)
		}
	}

	// A plain GET to the same path is a plain GET upstream: no upgrade is made up.
	if a := e.do(t, "GET", "/ws", ""); a.status != http.StatusUpgradeRequired {
		t.Fatalf("plain GET: %d %s", a.status, a.body)
	}
}

// webSocketUpstream is a checkout API answering every upgrade with 101 and handing the
// connection to h.
func webSocketUpstream(t *testing.T, h func(conn net.Conn, r *bufio.Reader)) string {
	t.Helper()
	addr, _ := serveNetHTTP(t, 0, func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			testkit.WebSocketAccept(r.Header.Get("Sec-WebSocket-Key")))
		_ = rw.Flush()
		h(conn, rw.Reader)
	})
	return addr
}

// upgrade opens a WebSocket through the edge at addr and returns the connection and its reader
// past the 101.
func upgrade(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /live HTTP/1.1\r\nHost: shop.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v, %v", resp, err)
	}
	return conn, r
}

// A tunnel is idle only when no byte moved either way for the read timeout (500 ms here): one
// side pushing every 200 ms to a silent other keeps it open, whichever side pushes; a tunnel
// where nothing moves is closed about the read timeout after its last byte. (Before: the
// client's reads and the upstream's had a read timeout each, so a push-only tunnel was closed
// after 500 ms.)
func TestAWebSocketTunnelIsIdleOnlyWhenNeitherSideMoves(t *testing.T) {
	const frames, every, readIdle = 10, 200 * time.Millisecond, 500 * time.Millisecond
	t.Run("upstream pushes", func(t *testing.T) {
		t.Parallel()
		addr := webSocketUpstream(t, func(conn net.Conn, _ *bufio.Reader) {
			for i := range frames {
				if _, err := conn.Write(testkit.WebSocketTextFrame([]byte(fmt.Sprint("push ", i)), nil)); err != nil {
					return
				}
				time.Sleep(every)
			}
		})
		e := passThroughEdge(t, addr, edgeConfig{timeout: readIdle})
		_, r := upgrade(t, e.addr)
		for i := range frames {
			if got, err := testkit.ReadWebSocketFrame(r); err != nil || string(got) != fmt.Sprint("push ", i) {
				t.Fatalf("frame %d of %d from the upstream to a silent client: %q, %v", i, frames, got, err)
			}
		}
	})
	t.Run("client pushes", func(t *testing.T) {
		t.Parallel()
		got := make(chan int, 1)
		addr := webSocketUpstream(t, func(_ net.Conn, r *bufio.Reader) {
			n := 0
			for ; n < frames; n++ {
				if _, err := testkit.ReadWebSocketFrame(r); err != nil {
					break
				}
			}
			got <- n
		})
		e := passThroughEdge(t, addr, edgeConfig{timeout: readIdle})
		conn, _ := upgrade(t, e.addr)
		for i := range frames {
			if _, err := conn.Write(testkit.WebSocketTextFrame([]byte(fmt.Sprint("push ", i)), []byte{1, 2, 3, 4})); err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
			time.Sleep(every)
		}
		if n := <-got; n != frames {
			t.Fatalf("the silent upstream got %d of %d frames", n, frames)
		}
	})
	t.Run("nothing moves", func(t *testing.T) {
		t.Parallel()
		addr := webSocketUpstream(t, func(_ net.Conn, r *bufio.Reader) { _, _ = io.Copy(io.Discard, r) })
		e := passThroughEdge(t, addr, edgeConfig{timeout: readIdle})
		_, r := upgrade(t, e.addr)
		start := time.Now()
		if _, err := r.ReadByte(); err != io.EOF {
			t.Fatalf("an idle tunnel: %v; want it closed", err)
		}
		if took := time.Since(start); took < readIdle-50*time.Millisecond || took > 4*readIdle {
			t.Fatalf("an idle tunnel closed after %v; want about %v", took, readIdle)
		}
	})
}

// Frames are bytes, not request headers: a payload with bare LFs (and CRs) goes through both
// ways. (Before: the edge's bare-LF check looked at the tunnel's bytes as headers and cut it.)
func TestWebSocketFramesMayHoldBareLF(t *testing.T) {
	addr := webSocketUpstream(t, func(conn net.Conn, r *bufio.Reader) {
		for {
			msg, err := testkit.ReadWebSocketFrame(r)
			if err != nil {
				return
			}
			_, _ = conn.Write(testkit.WebSocketTextFrame(msg, nil))
		}
	})
	e := passThroughEdge(t, addr, edgeConfig{})
	conn, r := upgrade(t, e.addr)
	for _, msg := range []string{"a\nb", "\n\n\r\n\n", "line one\nline two\n"} {
		if _, err := conn.Write(testkit.WebSocketTextFrame([]byte(msg), []byte{0, 0, 0, 0})); err != nil { // a zero mask: sent as it is
			t.Fatal(err)
		}
		if got, err := testkit.ReadWebSocketFrame(r); err != nil || string(got) != msg {
			t.Fatalf("echo of %q: %q, %v", msg, got, err)
		}
	}
}

// An upgraded connection stays a connection of the edge's: counted under the per-address cap
// while the tunnel is open, counted out once it closes, and its 101 counted among the answers.
func TestAWebSocketTunnelCountsUnderTheConnectionCaps(t *testing.T) {
	release := make(chan struct{})
	addr := webSocketUpstream(t, func(net.Conn, *bufio.Reader) { <-release })
	e := passThroughEdge(t, addr, edgeConfig{perIP: 1})
	upgraded := e.proxy.counts.answers.WithLabelValues("checkout", "101", "OK")
	before := testutil.ToFloat64(upgraded)
	upgrade(t, e.addr)
	if got := testutil.ToFloat64(upgraded) - before; got != 1 {
		t.Errorf("answers{route=checkout,status=101} went up by %v; want 1", got)
	}
	second := dialRawProxy(t, e.addr)
	if line, err := second.r.ReadString('\n'); err != nil || !strings.Contains(line, " 429 ") {
		t.Fatalf("a second connection while the tunnel is open: %q, %v; want 429", line, err)
	}
	close(release) // the upstream closes: the tunnel ends, its connection is counted out
	testkit.Eventually(t, "a connection admitted once the tunnel closed", func() bool {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: shop.example\r\n\r\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		return !strings.Contains(line, " 429 ")
	})
}
