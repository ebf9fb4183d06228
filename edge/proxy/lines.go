package proxy

import (
	"bytes"
	"errors"
	"net"

	"github.com/valyala/fasthttp"
)

// fasthttp takes a request line ended by a bare LF, then waits for a CRLF CRLF that never
// comes: a bare-LF request hangs until the read timeout. RFC 9112 §2.2 lets a recipient refuse
// bare LF, and the edge does, at once: its connections look at each request's header as it is
// read and fail the read at the first LF without its CR, so the server answers 400.
//
// Known gap: a request pipelined behind another, read in the same read as the one before it, is
// not looked at; it waits for the timeout as before.

// errBareLF fails a read that met a bare LF in a request's header.
var errBareLF = errors.New("bare LF in the request header")

// headConn checks the header bytes of the request being read. It is used by one goroutine at a
// time, the server's for the connection.
type headConn struct {
	net.Conn
	counted      // counted out of the caps once closed
	inHead  bool // reading a request's header: from a new or idle connection to its empty line
	bad     bool // a bare LF was met: the next read fails
	prev    byte // the byte before the one looked at next
	lineLen int  // bytes of the current line so far, its CR included
	lines   int  // lines of the header so far
}

// Close closes the connection and counts it out of the caps.
func (c *headConn) Close() error {
	c.done()
	return c.Conn.Close()
}

// Read passes on the bytes before a bare LF and fails the read after, so the server has a
// partial header when the error comes, and answers it (a read failing at a request's first byte
// would close a kept-alive connection without an answer).
func (c *headConn) Read(p []byte) (int, error) {
	if c.bad {
		return 0, errBareLF
	}
	n, err := c.Conn.Read(p)
	if c.inHead && n > 0 {
		if ok, at := c.scan(p[:n]); !ok {
			c.bad = true
			if at == 0 {
				return 0, errBareLF
			}
			return at, nil
		}
	}
	return n, err
}

// scan looks at b, the next bytes of a header, and reports false and the bare LF's offset at
// one. It stops at the header's end: what follows is a body.
func (c *headConn) scan(b []byte) (bool, int) {
	off := 0
	for off < len(b) {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			c.lineLen += len(b) - off
			c.prev = b[len(b)-1]
			return true, 0
		}
		if i > 0 {
			c.prev = b[off+i-1]
		}
		if c.prev != '\r' {
			return false, off + i
		}
		lineLen := c.lineLen + i // CR included
		c.lineLen, c.prev, off = 0, '\n', off+i+1
		if lineLen == 1 && c.lines > 0 { // an empty line after the request line: the end
			c.inHead = false
			return true, 0
		}
		if lineLen > 1 {
			c.lines++
		}
	}
	return true, 0
}

// expectHead makes the connection look at the next request's header.
func (c *headConn) expectHead() {
	c.inHead, c.bad, c.prev, c.lineLen, c.lines = true, false, 0, 0, 0
}

// connState is the server's ConnState: an idle connection reads a header next.
func connState(c net.Conn, s fasthttp.ConnState) {
	if h, ok := c.(headReader); ok && s == fasthttp.StateIdle {
		h.expectHead()
	}
}

// headReader is a connection whose next request's header is looked at (headConn, tlsHeadConn).
type headReader interface{ expectHead() }
