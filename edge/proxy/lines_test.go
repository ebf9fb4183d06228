package proxy

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// The requests a connection carries, as a client pipelines them.
var (
	getReq     = "GET /cart HTTP/1.1\r\nHost: shop.example\r\n\r\n"
	postReq    = "POST /cart HTTP/1.1\r\nHost: shop.example\r\ncontent-length:  9 \r\n\r\na\nb\n\r\n\nc" // a body of bare LFs
	chunkedReq = "POST /cart HTTP/1.1\r\nHost: shop.example\r\nTransfer-Encoding: chunked\r\n\r\n3\r\na\nb\r\n0\r\n\r\n"
	bareLFReq  = "GET /cart HTTP/1.1\r\nHost: shop.example\nX: y\r\n\r\n"
)

// A connection follows Content-Length framing through requests pipelined into one stream, read
// in pieces of any size: bare LFs in bodies pass, a bare LF in any header is found at its
// offset. After a chunked body it looks again only once the server has answered every request.
func TestHeadConnFollowsTheRequests(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reqs  []string
		badAt int // offset of the bare LF in the stream; -1: none
	}{
		{"pipelined, no bare LF", []string{getReq, postReq, getReq, postReq}, -1},
		{"bare LF after a get", []string{getReq, bareLFReq}, len(getReq) + strings.Index(bareLFReq, "\nX")},
		{"bare LF after a body of bare LFs", []string{postReq, postReq, bareLFReq}, 2*len(postReq) + strings.Index(bareLFReq, "\nX")},
		{"after a chunked body, not looked at", []string{chunkedReq, bareLFReq}, -1},
		{"two duplicate lengths that disagree, not followed", []string{
			"POST /cart HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", bareLFReq}, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stream := strings.Join(tt.reqs, "")
			for split := 1; split <= len(stream); split++ {
				pieces := []string{stream[:split], stream[split:]}
				if got := badOffset(pieces); got != tt.badAt {
					t.Fatalf("split at %d: bare LF found at %d; want %d", split, got, tt.badAt)
				}
			}
			r := rand.New(rand.NewPCG(1, 2))
			for range 200 {
				var pieces []string
				for rest := stream; rest != ""; {
					n := min(len(rest), 1+r.IntN(40))
					pieces, rest = append(pieces, rest[:n]), rest[n:]
				}
				if got := badOffset(pieces); got != tt.badAt {
					t.Fatalf("read as %q: bare LF found at %d; want %d", pieces, got, tt.badAt)
				}
			}
		})
	}
}

// After a chunked body, once the server has answered it, the next header is looked at; a body
// the server did not read (it answered without it) is skipped the same way.
func TestHeadConnLooksAgainOnceAnswered(t *testing.T) {
	for _, first := range []string{chunkedReq, "POST /cart HTTP/1.1\r\nContent-Length: 100\r\n\r\n"} {
		c := newHeadConn(&piecesConn{pieces: []string{first, bareLFReq}}, nil, netip.Addr{}, false)
		buf := make([]byte, 4096)
		if n, err := c.Read(buf); err != nil || n != len(first) {
			t.Fatalf("first read: %d, %v", n, err)
		}
		c.expectHead() // the server answered the first request
		if got := readOffset(c, len(first)); got != len(first)+strings.Index(bareLFReq, "\nX") {
			t.Errorf("after %q was answered: bare LF found at %d; want the next header's", first, got)
		}
	}
}

// badOffset reads pieces through a headConn and returns the stream offset at which it failed
// for a bare LF, or -1.
func badOffset(pieces []string) int {
	return readOffset(newHeadConn(&piecesConn{pieces: pieces}, nil, netip.Addr{}, false), 0)
}

// readOffset reads c to its end, from stream offset off, and returns the offset at which it
// failed for a bare LF, or -1. A read that meets one passes the bytes before it; the next fails.
func readOffset(c *headConn, off int) int {
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		off += n
		switch {
		case errors.Is(err, errBareLF):
			return off
		case err != nil:
			return -1
		}
	}
}

// piecesConn is a connection whose reads return pieces in turn, then io.EOF.
type piecesConn struct {
	net.Conn
	pieces []string
}

func (p *piecesConn) Read(b []byte) (int, error) {
	if len(p.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.pieces[0])
	if p.pieces[0] = p.pieces[0][n:]; p.pieces[0] == "" {
		p.pieces = p.pieces[1:]
	}
	return n, nil
}
