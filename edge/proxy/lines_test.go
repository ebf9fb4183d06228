package proxy

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
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

// badOffset reads pieces through a headConn and returns the stream offset at which it failed
// for a bare LF, or -1. A read that meets one passes the bytes before it; the next fails.
func badOffset(pieces []string) int {
	c := newHeadConn(&piecesConn{pieces: slices.Clone(pieces)}, nil, netip.Addr{}, false)
	buf := make([]byte, 4096)
	off := 0
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

// FuzzHeadConn builds, from the fuzzer's bytes, a stream of well-formed requests a client may
// pipeline (no body, a Content-Length body of any bytes, a chunked body), maybe with one
// request whose header has a bare LF, and reads it in pieces of the sizes the bytes choose.
// The oracle is the framing itself: a bare LF is reported exactly when the bad request comes
// before any chunked body (which ends what is followed), at its offset; never otherwise.
func FuzzHeadConn(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte("POST /cart\n\r\n\r\n"))
	f.Add([]byte{0, 0, 0, 200, 13, 10, 10, 2, 9, 1})
	f.Fuzz(func(t *testing.T, choices []byte) {
		pick := func(n int) int { // the next choice in [0, n)
			if len(choices) == 0 {
				return 0
			}
			c := int(choices[0])
			choices = choices[1:]
			return c % n
		}
		var stream strings.Builder
		want, chunked := -1, false
		for range 1 + pick(6) {
			var h strings.Builder
			h.WriteString("POST /cart HTTP/1.1\r\nHost: shop.example\r\n")
			if pick(4) == 0 {
				h.WriteString("X-Pad: " + strings.Repeat("p", pick(200)) + "\r\n")
			}
			switch pick(4) {
			case 0: // no body
				h.WriteString("\r\n")
			case 1, 2: // a Content-Length body of bytes a header must not have
				body := make([]byte, pick(64))
				for i := range body {
					body[i] = "\n\r:aGET /\x00"[pick(10)]
				}
				names := []string{"Content-Length", "content-length", "CONTENT-LENGTH"}
				h.WriteString(names[pick(3)] + ":" + strings.Repeat(" ", pick(3)) + strconv.Itoa(len(body)) + strings.Repeat(" ", pick(2)) + "\r\n\r\n")
				h.Write(body)
			case 3: // chunked: nothing after it is looked at
				h.WriteString("Transfer-Encoding: chunked\r\n\r\n3\r\na\nb\r\n0\r\n\r\n")
				chunked = true
			}
			if want < 0 && pick(5) == 0 {
				bad := "GET /cart HTTP/1.1\r\nHost: shop.example\nX: y\r\n\r\n"
				if !chunked {
					want = stream.Len() + h.Len() + strings.Index(bad, "\nX")
				}
				h.WriteString(bad)
				stream.WriteString(h.String())
				break // fasthttp closes the connection after its 400
			}
			stream.WriteString(h.String())
		}
		var pieces []string
		for rest := stream.String(); rest != ""; {
			n := min(len(rest), 1+pick(97))
			pieces, rest = append(pieces, rest[:n]), rest[n:]
		}
		if got := badOffset(pieces); got != want {
			t.Fatalf("bare LF found at %d; want %d (-1: none), reading %q", got, want, pieces)
		}
	})
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
