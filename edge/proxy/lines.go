package proxy

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
)

// fasthttp takes a request line ended by a bare LF, then waits for a CRLF CRLF that never
// comes: a bare-LF request hangs until the read timeout. RFC 9112 §2.2 lets a recipient refuse
// bare LF, and the edge does, at once: its connections look at each request's header as it is
// read and fail the read at the first LF without its CR, so the server answers 400.
//
// A connection follows the requests' framing: a header, then as many body bytes as its
// Content-Length says (none without one), then the next header, so requests pipelined into one
// read are looked at too. fasthttp reads every body it is sent before the next request, or
// closes the connection, so the two never disagree on where a header starts. A chunked body (or
// a length it cannot read) is not followed, and nothing after it on that connection is looked
// at: guessing where it ended could refuse a good request.

// errBareLF fails a read that met a bare LF in a request's header.
var errBareLF = errors.New("bare LF in the request header")

// headConn checks the header bytes of each request read on a connection. It is used by one
// goroutine at a time, the server's for the connection.
type headConn struct {
	net.Conn
	counted // counted out of the caps once closed

	at         part   // what the next byte read belongs to
	bad        bool   // a bare LF was met: the next read fails
	prev       byte   // the byte before the one looked at next
	lineLen    int    // bytes of the current header line so far, its CR included
	lines      int    // lines of the current header so far
	line       []byte // the current line's first bytes (up to lineKept), to find its framing headers
	lineBuf    [lineKept]byte
	length     int64 // the current header's Content-Length; -1: none yet
	unknownEnd bool  // the current header makes its body's end unknown (chunked, a bad length)
	bodyLeft   int64 // of the body being skipped
}

// part is what the bytes being read belong to.
type part uint8

const (
	inHead        part = iota // a request's header, up to its empty line
	inBody                    // its body, bodyLeft more bytes
	inUnknownBody             // a body whose end is not followed: nothing more is looked at
)

// lineKept is how much of a header line is kept to read framing headers: a Content-Length of
// up to 18 digits with a little space; a longer one is not followed (fasthttp refuses it).
const lineKept = 48

// newHeadConn returns c looking at its first request's header, counted in n from ip.
func newHeadConn(c net.Conn, n *conns, ip netip.Addr, hasIP bool) *headConn {
	h := &headConn{Conn: c, counted: counted{conns: n, ip: ip, hasIP: hasIP, conn: c}}
	h.startHead()
	return h
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
	if n > 0 {
		c.busy() // a request arrives: the connection no longer waits (idle.go)
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

// scan follows b, the next bytes read, through headers and bodies, and reports false and the
// offset of a bare LF in a header.
func (c *headConn) scan(b []byte) (bool, int) {
	off := 0
	for off < len(b) {
		switch c.at {
		case inUnknownBody:
			return true, 0
		case inBody:
			skip := min(c.bodyLeft, int64(len(b)-off))
			c.bodyLeft -= skip
			off += int(skip)
			if c.bodyLeft == 0 {
				c.startHead()
			}
		case inHead:
			n, ok := c.scanHead(b[off:])
			if !ok {
				return false, off + n
			}
			off += n
		}
	}
	return true, 0
}

// scanHead looks at b, the next bytes of a header, up to its end, and returns how many it
// took, or false and the offset of a bare LF.
func (c *headConn) scanHead(b []byte) (int, bool) {
	off := 0
	for off < len(b) {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			c.keep(b[off:])
			c.lineLen += len(b) - off
			c.prev = b[len(b)-1]
			return len(b), true
		}
		if i > 0 {
			c.prev = b[off+i-1]
		}
		if c.prev != '\r' {
			return off + i, false
		}
		c.keep(b[off : off+i])
		lineLen := c.lineLen + i // CR included
		off += i + 1
		if lineLen == 1 && c.lines > 0 { // an empty line after the request line: the end
			c.endHead()
			return off, true
		}
		if lineLen > 1 {
			if c.lines > 0 {
				c.framing(lineLen)
			}
			c.lines++
		}
		c.lineLen, c.prev, c.line = 0, '\n', c.lineBuf[:0]
	}
	return off, true
}

// keep adds the start of b to the current line's kept bytes.
func (c *headConn) keep(b []byte) {
	if room := lineKept - len(c.line); room > 0 {
		c.line = append(c.line, b[:min(room, len(b))]...)
	}
}

// framing reads a header line (lineLen bytes, its CR included) for what frames the body.
func (c *headConn) framing(lineLen int) {
	line := c.line
	if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') { // obs-fold: continues a line not followed
		c.unknownEnd = true
		return
	}
	name, value, ok := bytes.Cut(line, []byte{':'})
	spaced := len(bytes.TrimRight(name, " \t")) != len(name) // not a token: fasthttp refuses it
	name = bytes.TrimRight(name, " \t")
	switch {
	case !ok:
	case spaced && (bytes.EqualFold(name, []byte("Transfer-Encoding")) || bytes.EqualFold(name, []byte("Content-Length"))):
		c.unknownEnd = true
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		c.unknownEnd = true
	case bytes.EqualFold(name, []byte("Content-Length")):
		n, ok := contentLength(value, lineLen > lineKept)
		if !ok || (c.length >= 0 && c.length != n) {
			c.unknownEnd = true
		}
		c.length = n
	}
}

// contentLength reads a Content-Length value ("\r" and spaces around it allowed).
func contentLength(v []byte, cut bool) (int64, bool) {
	v = bytes.TrimSpace(v)
	if cut || len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, d := range v {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int64(d-'0')
	}
	return n, true
}

// endHead moves past a header read whole to its body, if it has one it follows.
func (c *headConn) endHead() {
	switch {
	case c.unknownEnd:
		c.at = inUnknownBody
	case c.length > 0:
		c.at, c.bodyLeft = inBody, c.length
	default:
		c.startHead()
	}
}

// tunnelled makes the connection pass on everything read from now on unlooked at: it was
// upgraded (a WebSocket tunnel), and carries frames, not requests.
func (c *headConn) tunnelled() { c.at = inUnknownBody }

// startHead makes the connection look at the next bytes as a new request's header.
func (c *headConn) startHead() {
	c.at, c.prev, c.lineLen, c.lines, c.line = inHead, 0, 0, 0, c.lineBuf[:0]
	c.length, c.unknownEnd, c.bodyLeft = -1, false, 0
}
