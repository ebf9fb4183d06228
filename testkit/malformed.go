package testkit

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// MalformedRequests returns HTTP requests fasthttp cannot read (an invalid header value, a
// request line without a version, an unknown version, a bad Content-Length), each carrying
// secret in its Authorization and Cookie headers and in its query, where a server that logs the
// request it could not read would write it.
func MalformedRequests(secret string) []string {
	auth := "Authorization: Bearer " + secret + "\r\nCookie: sid=" + secret + "\r\n"
	return []string{
		"GET /healthz?token=" + secret + " HTTP/1.1\r\nHost: x\r\n" + auth + "X-Bad: a\x01b\r\n\r\n",
		"GET /healthz?token=" + secret + "\r\n" + auth + "\r\n",
		"GET /healthz?token=" + secret + " HTTX/1.1\r\n" + auth + "\r\n",
		"POST /healthz?token=" + secret + " HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: x1\r\n\r\n",
	}
}

// SendMalformed sends n requests to addr, taking them from reqs in turn, each on its own
// connection (a server closes one after a request it cannot read), from workers goroutines, and
// returns once every connection was answered and closed. It fails the test if none could be
// sent.
func SendMalformed(t testing.TB, addr string, reqs []string, n, workers int) {
	t.Helper()
	var next, sent atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					continue
				}
				_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := io.WriteString(conn, reqs[i%int64(len(reqs))]); err == nil {
					_, _ = io.Copy(io.Discard, conn)
					sent.Add(1)
				}
				conn.Close()
			}
		}()
	}
	wg.Wait()
	if sent.Load() == 0 {
		t.Fatalf("none of %d malformed requests could be sent to %s", n, addr)
	}
}
