package proxy

import (
	"crypto/tls"
	"net"

	"github.com/valyala/fasthttp"
)

// Idle keep-alive connections make room near the cap. A crowd holding connections open
// between requests would otherwise keep every new shopper at 503 until its idle timeout: the
// server tells a connection when it has answered and waits for the next request (ConnState),
// the connection's first byte read after that, or the server starting on a request pipelined
// behind the last, makes it busy again (headConn.Read, StateActive), and a connection admitted
// at nearCap or above closes the connection that has waited longest. A connection still
// waiting for its first request is not idle: ReadTimeout bounds it. A request sent just as its
// connection is closed is lost as on any server closing an idle keep-alive connection; clients
// retry it on a new one.

// nearCap is the count of open connections from which each new one closes an idle one: 7/8 of
// the cap, so a burst of arrivals finds room while idle connections are closed.
func nearCap(maxConns int) int { return maxConns - maxConns/8 }

// connState is the server's ConnState hook: it tells a connection of ClientListener when it
// waits for its next request, and when it serves one again. A request pipelined behind the last
// one is served from what was read with it, without another read (headConn.Read): only the
// server's StateActive says the connection is busy then. Other connections are left alone.
func connState(c net.Conn, s fasthttp.ConnState) {
	h, ok := c.(interface {
		waiting(bool)
		busy()
	})
	if !ok {
		return
	}
	switch s {
	case fasthttp.StateIdle:
		h.waiting(true)
	case fasthttp.StateActive:
		h.busy()
	}
}

// busy takes c off the idle list if it is on it; the lock is taken only then.
func (c *counted) busy() {
	if c.isIdle.Load() {
		c.waiting(false)
	}
}

// waiting records whether c waits for its next request. It is a no-op without a cap in all.
func (c *counted) waiting(idle bool) {
	n := c.conns
	if n == nil || n.caps.MaxConns <= 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if c.closed.Load() {
		return
	}
	n.unidleLocked(c)
	if idle {
		n.idle.pushBack(c)
		c.isIdle.Store(true)
	}
}

// unidleLocked takes c off the idle list.
func (n *conns) unidleLocked(c *counted) {
	if c.isIdle.Load() {
		n.idle.remove(c)
		c.isIdle.Store(false)
	}
}

// idleList is a list of connections threaded through them, so that a connection going idle
// after each request allocates nothing (container/list would allocate an element each time).
type idleList struct {
	front, back *counted
	len         int
}

func (l *idleList) pushBack(c *counted) {
	c.prev, c.next = l.back, nil
	if l.back != nil {
		l.back.next = c
	} else {
		l.front = c
	}
	l.back = c
	l.len++
}

func (l *idleList) remove(c *counted) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.front = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.back = c.prev
	}
	c.prev, c.next = nil, nil
	l.len--
}

// takeIdleLocked counts out the connection idle longest and returns it, or nil when none is.
func (n *conns) takeIdleLocked() *counted {
	for c := n.idle.front; c != nil; c = n.idle.front {
		n.unidleLocked(c)
		if c.closed.CompareAndSwap(false, true) { // else it is closing: its done counts it out
			n.countOutLocked(c)
			return c
		}
	}
	return nil
}

// closeIdle closes a connection admit took out to make room. It runs on the accepting
// goroutine, so under TLS it closes the TCP connection: tls.Conn.Close first writes a
// close_notify, which waits up to 5 s on a client that stopped reading with its buffers full.
func (n *conns) closeIdle(c *counted) {
	if c == nil {
		return
	}
	conn := c.conn
	if t, ok := conn.(*tls.Conn); ok {
		conn = t.NetConn()
	}
	_ = conn.Close()
	if n.caps.IdleClosed != nil {
		n.caps.IdleClosed()
	}
}
