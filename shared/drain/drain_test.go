package drain_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/drain"
)

// A request written on a kept-alive connection just before Shutdown is answered (with
// Connection: close if it is read after Shutdown began), and Shutdown returns once it is; then
// the listener refuses connections.
// fasthttp's Shutdown alone closes such a connection as idle when the request is still unread in
// its socket. Many rounds, since that is a race.
func TestRequestWrittenBeforeShutdownIsAnswered(t *testing.T) {
	closing := 0 // answers that closed their connection: the request was read after Shutdown began
	for round := range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		d := drain.New(&fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") }})
		served := make(chan error, 1)
		go func() { served <- d.Serve(ln) }()

		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		get := func() (*http.Response, error) {
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				return nil, err
			}
			resp, err := http.ReadResponse(r, nil)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
			}
			return resp, err
		}
		if resp, err := get(); err != nil || resp.StatusCode != 200 || resp.Close {
			t.Fatalf("round %d: first request: %v %v", round, resp, err)
		}
		if d.Draining() {
			t.Fatalf("round %d: draining before Shutdown", round)
		}

		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		shut := make(chan error, 1)
		go func() { shut <- d.Shutdown(context.Background()) }()
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("round %d: request written before Shutdown: %v", round, err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("round %d: request written before Shutdown: %d; want 200", round, resp.StatusCode)
		}
		if resp.Close {
			closing++
		}
		c.Close()
		if err := <-shut; err != nil {
			t.Fatalf("round %d: Shutdown: %v", round, err)
		}
		if err := <-served; err != nil {
			t.Fatalf("round %d: Serve: %v", round, err)
		}
		if !d.Draining() {
			t.Fatalf("round %d: not draining after Shutdown", round)
		}
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			c.Close()
			t.Fatalf("round %d: a connection accepted after Shutdown", round)
		}
	}
	t.Logf("%d of 50 requests were read after Shutdown began, and answered with Connection: close", closing)
}
