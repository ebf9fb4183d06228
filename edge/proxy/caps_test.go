package proxy

import (
	"net"
	"net/netip"
	"testing"
)

// The caps count connections in and out: per address (IPv4 and its IPv6-mapped form one
// address), in all (an address that is not IP counted in all only), and a connection closed
// twice counts out once; when every connection is gone, nothing is left in the table.
func TestConnsCountInAndOut(t *testing.T) {
	n := newConns(Caps{MaxConns: 5, MaxConnsPerIP: 2})
	a := netip.MustParseAddr("10.0.0.1")
	mapped := netip.AddrFrom16(a.As16()).Unmap()
	b := netip.MustParseAddr("2001:db8::1")
	steps := []struct {
		ip    netip.Addr
		hasIP bool
		want  int
	}{
		{a, true, 0}, {mapped, true, 0}, {a, true, 429}, // a holds 2
		{b, true, 0}, {b, true, 0}, {b, true, 429}, // b holds 2
		{netip.Addr{}, false, 0},   // 5 in all
		{netip.Addr{}, false, 503}, // in all first
		{netip.MustParseAddr("10.0.0.2"), true, 503},
	}
	var admitted []*counted
	for i, s := range steps {
		if got, _ := n.admit(s.ip, s.hasIP); got != s.want {
			t.Fatalf("step %d (%v): admit %d; want %d", i, s.ip, got, s.want)
		}
		if s.want == 0 {
			admitted = append(admitted, &counted{conns: n, ip: s.ip, hasIP: s.hasIP})
		}
	}
	admitted[0].done()
	admitted[0].done() // closed twice: counted out once
	if got, _ := n.admit(a, true); got != 0 {
		t.Fatalf("after one of a's closed: admit %d; want 0", got)
	}
	if got, _ := n.admit(b, true); got != 503 {
		t.Fatalf("5 open again: admit %d; want 503", got)
	}
	admitted[0] = &counted{conns: n, ip: a, hasIP: true}
	for _, c := range admitted {
		c.done()
	}
	if n.total != 0 || len(n.perIP) != 0 {
		t.Fatalf("all closed: total %d, per address %v; want nothing", n.total, n.perIP)
	}
}

func TestClientIPIsOneKeyForMappedIPv4(t *testing.T) {
	c4 := fakeAddrConn{addr: &net.TCPAddr{IP: net.ParseIP("192.0.2.7").To4(), Port: 1}}
	c6 := fakeAddrConn{addr: &net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 2}}
	ip4, ok4 := clientIP(c4)
	ip6, ok6 := clientIP(c6)
	if !ok4 || !ok6 || ip4 != ip6 {
		t.Fatalf("clientIP: %v %v, %v %v; want one address", ip4, ok4, ip6, ok6)
	}
	if _, ok := clientIP(fakeAddrConn{addr: &net.UnixAddr{Name: "x", Net: "unix"}}); ok {
		t.Fatal("a unix address has an IP")
	}
}

// fakeAddrConn is a connection that only has a remote address.
type fakeAddrConn struct {
	net.Conn
	addr net.Addr
}

func (f fakeAddrConn) RemoteAddr() net.Addr { return f.addr }
