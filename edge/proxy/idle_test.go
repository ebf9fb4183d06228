package proxy

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/testkit"
)

// Near the cap in all (7/8 of it), each connection admitted closes the connection idle longest:
// the order is when each began to wait, a connection that got a request since is not idle,
// and one never idle (waiting for its first request) is never closed. With none idle at the cap,
// a new connection is refused as before.
func TestIdleConnectionsMakeRoomOldestIdleFirst(t *testing.T) {
	closed := 0
	n := newConns(Caps{MaxConns: 8, MaxConnsPerIP: 8, IdleClosed: func() { closed++ }})
	ip := netip.MustParseAddr("10.0.0.1")
	open := func() *headConn {
		t.Helper()
		status, idle := n.admit(ip, true)
		if status != 0 || idle != nil {
			t.Fatalf("admit below the cap: %d, closing %v", status, idle)
		}
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return newHeadConn(a, n, ip, true)
	}
	var c [7]*headConn // 7 open: nearCap(8)
	for i := range c {
		c[i] = open()
	}
	c[3].waiting(true)
	c[1].waiting(true)
	c[5].waiting(true)
	c[1].waiting(false) // a request came on 1
	c[1].waiting(true)  // and was answered: idle again, now the newest

	for _, want := range []int{3, 5, 1} {
		status, idle := n.admit(ip, true)
		if status != 0 || idle != &c[want].counted {
			t.Fatalf("admit near the cap: %d, closing %p; want 0, closing connection %d", status, idle, want)
		}
		n.closeIdle(idle)
		if _, err := c[want].Conn.Write([]byte("x")); err == nil {
			t.Fatalf("connection %d was not closed", want)
		}
		c[want].Close() // the server closes it after its read fails: counted out once only
	}
	if n.total != 7 || closed != 3 {
		t.Fatalf("%d open, %d idle closed; want 7 and 3", n.total, closed)
	}
	if status, _ := n.admit(ip, true); status != 0 { // 8: the cap, none idle
		t.Fatalf("the 8th: %d; want 0", status)
	}
	if status, idle := n.admit(ip, true); status != 503 || idle != nil {
		t.Fatalf("at the cap with none idle: %d, closing %v; want 503", status, idle)
	}
}

// A connection refused for its address closes nobody's idle connection: the per-address cap is
// checked before room is made near the cap in all. (Before: each refused connection from a
// capped address first closed another client's idle one.)
func TestAConnectionOverItsAddressCapClosesNoIdleConnection(t *testing.T) {
	n := newConns(Caps{MaxConns: 8, MaxConnsPerIP: 1})
	crowd, other := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	if status, _ := n.admit(crowd, true); status != 0 {
		t.Fatalf("the crowd's first: %d", status)
	}
	var idle []*headConn
	for i := range 6 { // 7 open: nearCap(8), six of them idle, none the crowd's
		ip := netip.AddrFrom4([4]byte{10, 0, 1, byte(i)})
		if status, _ := n.admit(ip, true); status != 0 {
			t.Fatalf("admit %v: %d", ip, status)
		}
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		c := newHeadConn(a, n, ip, true)
		c.waiting(true)
		idle = append(idle, c)
	}
	for range 3 {
		if status, closeIdle := n.admit(crowd, true); status != 429 || closeIdle != nil {
			t.Fatalf("over its address's cap: %d, closing %p; want 429, closing none", status, closeIdle)
		}
	}
	if n.idle.len != 6 || n.total != 7 {
		t.Fatalf("%d idle, %d open; want all 6 idle still there, 7 open", n.idle.len, n.total)
	}
	if status, closeIdle := n.admit(other, true); status != 0 || closeIdle != &idle[0].counted {
		t.Fatalf("another address near the cap: %d, closing %p; want 0, closing the oldest idle", status, closeIdle)
	}
}

// A read of a request's first byte takes the connection off the idle list.
func TestAReadMakesAnIdleConnectionBusy(t *testing.T) {
	n := newConns(Caps{MaxConns: 8})
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	n.admit(netip.Addr{}, false)
	h := newHeadConn(a, n, netip.Addr{}, false)
	h.waiting(true)
	go func() { _, _ = b.Write([]byte("GET / HTTP/1.1\r\n")) }()
	if _, err := h.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	if h.isIdle.Load() || n.idle.len != 0 {
		t.Fatal("a connection reading a request is still idle")
	}
}

// Going idle and busy again, once per request, allocates nothing.
func TestWaitingAllocatesNothing(t *testing.T) {
	n := newConns(Caps{MaxConns: 8})
	c := &counted{conns: n}
	if allocs := testing.AllocsPerRun(100, func() { c.waiting(true); c.waiting(false) }); allocs != 0 {
		t.Fatalf("%v allocations per request; want 0", allocs)
	}
}

// An idle TLS connection closed to make room is closed at once, even when its client stopped
// reading with the edge's send buffer full: the next connection is served without waiting.
// (Before: tls.Conn.Close wrote a close_notify on the accepting goroutine and waited its 5 s
// for room, so every new connection waited too.) The edge's send buffers are set small and the
// client's receive buffer too, so that a few answers fill them: a first connection finds how
// many answers go out before one waits, a second asks exactly that many and goes idle full.
func TestAnIdleTLSClientThatStoppedReadingDoesNotHoldUpTheNext(t *testing.T) {
	serverTLS, clientTLS := selfSignedTLS(t)
	var served atomic.Int32
	e := startEdge(t, edgeConfig{
		backends: []string{"127.0.0.1:1"}, maxConns: 1, // nearCap(1) is 1: each new connection closes the idle one
		local:  func(ctx *fasthttp.RequestCtx) { served.Add(1); ctx.SetBodyString(strings.Repeat("x", 1000)) },
		listen: func(ln net.Listener) net.Listener { return tls.NewListener(smallSendBuffers{ln}, serverTLS) },
	})
	dial := func() *tls.Conn {
		t.Helper()
		d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		}}
		c, err := tls.DialWithDialer(&d, "tcp", e.addr, clientTLS)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// unread asks for an answer it does not read, and reports whether the edge wrote it whole
	// within wait: the connection went idle after it rather than waiting for room. The probe
	// waits 2 s for each (an answer not out by then is taken as finding no room: a loaded
	// machine only makes fit smaller); the full connection, which must fit what the probe did,
	// waits 5 s.
	unread := func(c *tls.Conn, wait time.Duration) bool {
		t.Helper()
		want := served.Load() + 1
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: edge\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if served.Load() >= want && e.conns.idleCount() == 1 {
				return true
			}
		}
		return false
	}

	probe, fit := dial(), 0
	for unread(probe, 2*time.Second) {
		if fit++; fit > 1000 {
			t.Fatal("1,000 answers went out unread: the buffers are not small")
		}
	}
	probe.Close()
	testkit.Eventually(t, "the probing connection closed", func() bool { return e.conns.openCount() == 0 })

	full := dial()
	for i := range fit {
		if !unread(full, 5*time.Second) {
			t.Fatalf("answer %d of %d did not go out", i+1, fit)
		}
	}
	start := time.Now()
	shopper := dial()
	if _, err := io.WriteString(shopper, "GET /healthz HTTP/1.1\r\nHost: edge\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(shopper), nil)
	if err != nil {
		t.Fatalf("the next connection after the idle one was closed: %v", err)
	}
	resp.Body.Close()
	took := time.Since(start)
	t.Logf("%d answers filled the idle connection's buffers; the next connection was answered %d after %v", fit, resp.StatusCode, took.Round(time.Millisecond))
	if resp.StatusCode != 200 || took > 2*time.Second {
		t.Fatalf("the next connection: %d after %v; want 200 at once (closing the idle one must not wait for its client)", resp.StatusCode, took)
	}
}

// smallSendBuffers sets the send buffer of each connection it accepts to the kernel's least.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

func (n *conns) idleCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.idle.len
}

func (n *conns) openCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.total
}

// selfSignedTLS returns a server configuration with a certificate for 127.0.0.1 and a client
// configuration that trusts it.
func selfSignedTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
}

// A connection serving a request pipelined behind one just answered is busy, not idle: a
// shopper arriving near the cap meanwhile does not close it, and both answers reach the client.
// (Before: the server said the connection waited for its next request once the first was
// answered, and read the second from what it had already read, so nothing took it off the idle
// list: the shopper closed it mid-answer, with the first answer still held back for the second.)
func TestAPipelinedRequestKeepsItsConnectionBusy(t *testing.T) {
	arrived := make(chan struct{}, 1)
	addr, _ := serveNetHTTP(t, 0, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		time.Sleep(time.Second)
		fmt.Fprint(w, "slow")
	})
	e := passThroughEdge(t, addr, edgeConfig{maxConns: 8, local: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") }})
	for range 6 { // silent connections, not idle: with the pipelining one, 7 open, nearCap(8)
		dialRawProxy(t, e.addr)
	}
	testkit.Eventually(t, "6 connections open", func() bool { return e.conns.openCount() == 6 })
	c := dialRawProxy(t, e.addr)
	fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: edge\r\n\r\nGET /cart HTTP/1.1\r\nHost: shop.example\r\n\r\n")
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the pipelined request never reached the checkout API")
	}
	if status, body := testkit.RawHTTP(t, e.addr, "GET /healthz HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n"); status != 200 {
		t.Fatalf("a shopper arriving near the cap: %d %s; want 200 (7 open of 8)", status, body)
	}
	for _, want := range []string{"ok", "slow"} {
		resp, err := http.ReadResponse(c.r, nil)
		if err != nil {
			t.Fatalf("answer %q on the pipelining connection: %v (closed to make room mid-answer)", want, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("answer %d %q; want 200 %q", resp.StatusCode, body, want)
		}
	}
}
