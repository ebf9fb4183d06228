package upstream

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of a checkout call that the proxy answers in its own way.
var (
	// ErrStaleConn means an idle kept-alive connection was found closed by the server before
	// the request was written on it: the request was not sent, so it is retried on another.
	ErrStaleConn = errors.New("idle connection closed by the server; request not sent")
	// ErrClientGone means the client went away while its call was in flight, which was then
	// cut: nobody is left to answer.
	ErrClientGone = errors.New("the client went away; call cancelled")
)

// Call is one streamed call to the checkout API: its timeouts, and the connection it holds
// until its answer's body is read to the end or given up (Release). Abort may be called from
// any goroutine; the rest belongs to the goroutine making the call.
type Call struct {
	ReadIdle time.Duration // longest wait for the next byte of the answer (its header included)
	Deadline time.Time     // the call's end in all; zero: none

	aborted atomic.Bool
	mu      sync.Mutex
	conn    *conn // the connection carrying the call, while it does

	release func(reuse bool) // gives the connection back; set once the answer's header is read
	conn2   net.Conn         // the connection as fasthttp holds it (TLS included), for Takeover
	reader  *bufio.Reader    // what was read from it past the answer's header

	// The last failed attempt, for the retry decision (retryCheckout), and what the next needs.
	failedReused   bool // it ran on a connection that had carried a request before
	failedAnswered bool // some byte of the answer had come back
	fresh          bool // the next attempt MUST run on a connection of its own, dialled for it
}

// Abort cuts the call: its connection is closed, so a wait for the answer ends at once.
func (c *Call) Abort() {
	c.aborted.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		_ = c.conn.Conn.Close()
	}
}

// Aborted reports whether Abort was called.
func (c *Call) Aborted() bool { return c.aborted.Load() }

// Release gives the call's connection back once its answer's body is done with: kept for the
// next call when the body was read to its end (reuse), closed otherwise. Calling it again, or
// on a call that failed, does nothing.
func (c *Call) Release(reuse bool) {
	if r := c.release; r != nil {
		c.release = nil
		r(reuse && !c.Aborted())
	}
}

// Takeover hands the call's connection, after a 101 Switching Protocols, to the caller, with
// the reader holding what the server sent past the 101's header. Reads keep their ReadIdle
// bound. The caller MUST call Release(false) when done: the connection is then closed.
func (c *Call) Takeover() (net.Conn, *bufio.Reader) { return c.conn2, c.reader }

// attach makes c the call conn carries; a call aborted before closes it at once.
func (c *Call) attach(w *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conn = w
	if c.aborted.Load() {
		_ = w.Conn.Close()
	}
}

func (c *Call) detach() {
	c.mu.Lock()
	c.conn = nil
	c.mu.Unlock()
}

// conn is a connection to the checkout API. It checks, before the first write of a request
// on a connection that carried one before, that the server has not closed it while it was idle
// (the stale keep-alive race: a server closing idle connections after a few seconds, as
// Node.js does after 5), and bounds each read by the call's ReadIdle, renewed at every read,
// rather than one deadline for the whole answer.
type conn struct {
	net.Conn
	used     bool  // a request was written on it before
	check    bool  // the next write starts a request on a reused connection
	answered bool  // a byte came back since the call began
	call     *Call // the call it carries, if any
}

// ours returns the conn under c (under TLS, fasthttp wraps what the dialer returned).
func ours(c net.Conn) *conn {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	w, _ := c.(*conn)
	return w
}

// begin starts a call on the connection.
func (w *conn) begin(c *Call) {
	w.call = c
	w.check = w.used
	w.used = true
	w.answered = false
	c.attach(w)
}

// end ends the call on the connection.
func (w *conn) end() {
	if w.call != nil {
		w.call.detach()
		w.call = nil
	}
}

func (w *conn) Write(p []byte) (int, error) {
	if w.check {
		w.check = false
		if !idleUsable(w.Conn) {
			return 0, ErrStaleConn
		}
	}
	return w.Conn.Write(p)
}

func (w *conn) Read(p []byte) (int, error) {
	if c := w.call; c != nil && c.ReadIdle > 0 {
		_ = w.Conn.SetReadDeadline(within(c.ReadIdle, c.Deadline))
	}
	n, err := w.Conn.Read(p)
	if n > 0 {
		w.answered = true
	}
	return n, err
}

// within is now plus d, or deadline when that comes first.
func within(d time.Duration, deadline time.Time) time.Time {
	t := time.Now().Add(d)
	if !deadline.IsZero() && deadline.Before(t) {
		return deadline
	}
	return t
}
