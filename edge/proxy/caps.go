package proxy

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"vouchergate/shared/wire"
)

// Caps bound the client connections the edge holds open. They are counted by the edge's
// listener (ClientListener), not by fasthttp's Concurrency and MaxConnsPerIP, which refuse
// with a plain-text answer: the listener answers JSON like every other refusal. Near the cap in
// all, idle keep-alive connections are closed to make room, oldest idle first (idle.go).
type Caps struct {
	MaxConns      int    // open client connections in all; 0: no cap
	MaxConnsPerIP int    // open connections from one client address; 0: no cap
	IdleClosed    func() // called for each idle connection closed to make room; nil: none
}

// conns counts the open client connections against Caps. It is safe for concurrent use:
// connections are counted in by the accepting goroutine and out by whichever closes them.
type conns struct {
	caps Caps

	mu    sync.Mutex
	total int
	perIP map[netip.Addr]int
	idle  idleList // connections waiting for their next request, oldest idle first
}

func newConns(c Caps) *conns { return &conns{caps: c, perIP: make(map[netip.Addr]int)} }

// admit counts in a connection from ip (hasIP false: an address that is not IP, never capped
// by address) and returns 0, or the status to refuse it with, counting nothing. Near the cap
// in all, a connection its address's cap lets in first counts out the oldest idle connection,
// which admit returns for the caller to close (nil: none); one refused for its address closes
// nobody's.
func (n *conns) admit(ip netip.Addr, hasIP bool) (status int, closeIdle *counted) {
	n.mu.Lock()
	defer n.mu.Unlock()
	perIP := n.caps.MaxConnsPerIP > 0 && hasIP
	if perIP && n.perIP[ip] >= n.caps.MaxConnsPerIP {
		if n.caps.MaxConns > 0 && n.total >= n.caps.MaxConns {
			return 503, nil // the cap in all is named first
		}
		return 429, nil
	}
	if n.caps.MaxConns > 0 && n.total >= nearCap(n.caps.MaxConns) {
		closeIdle = n.takeIdleLocked()
	}
	if n.caps.MaxConns > 0 && n.total >= n.caps.MaxConns {
		return 503, closeIdle
	}
	n.total++
	if perIP {
		n.perIP[ip]++
	}
	return 0, closeIdle
}

// release counts out a connection admit took.
func (n *conns) release(c *counted) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.countOutLocked(c)
}

func (n *conns) countOutLocked(c *counted) {
	n.unidleLocked(c)
	ip, hasIP := c.ip, c.hasIP
	n.total--
	if n.caps.MaxConnsPerIP > 0 && hasIP {
		if n.perIP[ip] <= 1 {
			delete(n.perIP, ip)
		} else {
			n.perIP[ip]--
		}
	}
}

// clientIP is the address a connection comes from, as one key for IPv4 and IPv4-mapped IPv6.
func clientIP(c net.Conn) (netip.Addr, bool) {
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	return ip.Unmap(), ok
}

// counted is what a connection admitted under the caps gives back once, when it closes.
type counted struct {
	conns      *conns
	ip         netip.Addr
	hasIP      bool
	closed     atomic.Bool
	conn       net.Conn    // closed to make room while idle
	prev, next *counted    // in conns.idle while waiting for a request; guarded by conns.mu
	isIdle     atomic.Bool // in conns.idle, read without the lock
}

func (c *counted) done() {
	if c.conns != nil && c.closed.CompareAndSwap(false, true) {
		c.conns.release(c)
	}
}

// refusals are the answers to a connection over a cap, written before its request is read.
var refusals = map[int][]byte{
	429: refusal(429, "Too Many Requests", "", wire.Error{Error: wire.CodeTooManyConnections,
		Message: "too many open connections from this address; close idle ones or retry later"}),
	503: refusal(503, "Service Unavailable", "Retry-After: 1\r\n", wire.Error{Error: wire.CodeUnavailable,
		Message: "the edge holds as many connections as it may; retry shortly"}),
}

func refusal(status int, reason, extra string, e wire.Error) []byte {
	body, _ := json.Marshal(e) // two strings: cannot fail
	return []byte("HTTP/1.1 " + strconv.Itoa(status) + " " + reason + "\r\nContent-Type: application/json\r\n" +
		extra + "Connection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body))
}

// refuse answers a connection over a cap and closes it. A TLS connection is closed unanswered:
// an answer would first need its handshake, which the accepting goroutine must not wait for.
func refuse(c net.Conn, status int) {
	if _, isTLS := c.(*tls.Conn); !isTLS {
		// A new connection's send buffer is empty: the write does not wait, the deadline is a guard.
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Write(refusals[status])
	}
	_ = c.Close()
}
