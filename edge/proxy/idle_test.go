package proxy

import (
	"net"
	"net/netip"
	"testing"
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
