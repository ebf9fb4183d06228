package proxy

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// rawUpstream is a checkout API written raw on 127.0.0.1: it reads each request's header and
// calls answer with the request's line and its number on its connection (1 for the first); an
// empty answer closes the connection unanswered. It counts the requests it read.
func rawUpstream(t *testing.T, answer func(line string, nth int) string) (addr string, hits *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	hits = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for nth := 1; ; nth++ {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					length := 0
					for { // the header, then a body of Content-Length
						h, err := r.ReadString('\n')
						if err != nil {
							return
						}
						if h == "\r\n" {
							break
						}
						if k, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(k, "Content-Length") {
							length = atoi(strings.TrimSpace(v))
						}
					}
					if _, err := r.Discard(length); err != nil {
						return
					}
					hits.Add(1)
					out := answer(strings.TrimSpace(line), nth)
					if out == "" {
						return
					}
					if _, err := c.Write([]byte(out)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), hits
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func okAnswer(body string) string {
	return "HTTP/1.1 200 OK\r\nContent-Length: " + itoa(len(body)) + "\r\n\r\n" + body
}

// A checkout API that reads a request on a fresh connection and closes it unanswered had the
// request: it gets it once, whatever the method, and the client a 502. (Before: a GET or PUT
// was sent twice.)
func TestAFreshConnectionClosedUnansweredIsNotRetried(t *testing.T) {
	addr, hits := rawUpstream(t, func(string, int) string { return "" })
	e := passThroughEdge(t, addr, edgeConfig{})
	for _, method := range []string{"GET", "PUT", "POST"} {
		before := hits.Load()
		a := e.do(t, method, "/cart", "x")
		if a.status != http.StatusBadGateway {
			t.Errorf("%s: %d %s; want 502", method, a.status, a.body)
		}
		if n := hits.Load() - before; n != 1 {
			t.Errorf("%s reached the checkout API %d times; want once", method, n)
		}
	}
}

// A checkout API that reads a second request on a kept-alive connection and closes it unanswered
// (it closed the connection as idle while the request was on its way): an idempotent request
// is sent once more, on a fresh connection, and answered; a POST is not sent twice.
func TestAReusedConnectionClosedUnansweredRetriesIdempotentRequestsOnce(t *testing.T) {
	for _, tt := range []struct {
		method string
		status int
		hits   int32 // for the second request
	}{{"GET", 200, 2}, {"PUT", 200, 2}, {"DELETE", 200, 2}, {"POST", 502, 1}} {
		t.Run(tt.method, func(t *testing.T) {
			addr, hits := rawUpstream(t, func(line string, nth int) string {
				if nth > 1 {
					return ""
				}
				return okAnswer(line)
			})
			e := passThroughEdge(t, addr, edgeConfig{})
			if a := e.do(t, tt.method, "/first", "x"); a.status != 200 { // leaves a kept-alive connection
				t.Fatalf("first: %d %s", a.status, a.body)
			}
			a := e.do(t, tt.method, "/second", "x")
			if a.status != tt.status || (a.status == 200 && a.body != tt.method+" /second HTTP/1.1") {
				t.Errorf("on a reused connection closed unanswered: %d %q; want %d", a.status, a.body, tt.status)
			}
			if n := hits.Load() - 1; n != tt.hits {
				t.Errorf("the second request reached the checkout API %d times; want %d", n, tt.hits)
			}
		})
	}
}
