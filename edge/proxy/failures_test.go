package proxy

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/testkit"
)

// freeAddr returns an address on which nothing listens.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// noGoErrorText fails the test if an answer leaks an error's text.
func noGoErrorText(t *testing.T, a answerOf) {
	t.Helper()
	for _, leak := range []string{"fasthttp", "dial", "refused", "127.0.0.1", "tcp", "EOF", "timeout"} {
		if strings.Contains(a.body, leak) {
			t.Errorf("answer %q leaks %q", a.body, leak)
		}
	}
}

func TestUpstreamFailuresGetJSONGatewayErrors(t *testing.T) {
	hang := make(chan struct{})
	slowAddr, _ := testkit.ServeHTTP(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) != "/healthz" {
			<-hang
		}
	})
	t.Cleanup(func() { close(hang) }) // before the server's shutdown, which waits for handlers
	bigAddr, _ := testkit.ServeHTTP(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBody(make([]byte, 64<<10)) })
	b := newFakeBackend(map[string]int{"FLASH": 5})
	bAddr, _ := testkit.ServeHTTP(t, b.handle)

	tests := []struct {
		name     string
		checkout string
		status   int
		code     string
	}{
		{"refused", freeAddr(t), 502, "BAD_GATEWAY"},
		{"hung", slowAddr, 504, "GATEWAY_TIMEOUT"},
		{"answer too large", bigAddr, 502, "BAD_GATEWAY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := startEdge(t, edgeConfig{backends: []string{bAddr}, checkout: tt.checkout, timeout: 300 * time.Millisecond, maxResp: 16 << 10})
			// The edge answers from its own 300 ms bound: a hung checkout API is a 504, not a hang.
			a := e.do(t, "GET", "/cart", "")
			if a.status != tt.status || errorCode(t, a) != tt.code {
				t.Fatalf("answer %d %s; want %d %s", a.status, a.body, tt.status, tt.code)
			}
			if !validRequestID(a.header.Peek("X-Request-Id")) {
				t.Error("gateway error without a request id")
			}
			noGoErrorText(t, a)
		})
	}
}

func TestNoBackendGets503WithRetryAfter(t *testing.T) {
	e := startEdge(t, edgeConfig{backends: []string{freeAddr(t)}})
	testkit.Eventually(t, "dead backend out of service", func() bool { return e.pool.Healthy() == 0 })
	a := e.reserve(t, "FLASH", "o-1")
	if a.status != 503 || errorCode(t, a) != "UNAVAILABLE" || string(a.header.Peek("Retry-After")) != "1" {
		t.Fatalf("answer %d %s (Retry-After %q); want 503 UNAVAILABLE with Retry-After", a.status, a.body, a.header.Peek("Retry-After"))
	}
	noGoErrorText(t, a)

	// The sold-out answer needs no backend.
	_ = e.cache.Apply(soldOutState("FLASH", "o-1"))
	if a := e.reserve(t, "FLASH", "o-2"); a.status != 409 {
		t.Fatalf("sold-out answer with no backend: %d %s", a.status, a.body)
	}
}

func TestAKilledBackendIsRoutedAroundAndTakenBack(t *testing.T) {
	b1, b2 := newFakeBackend(map[string]int{"FLASH": 1000}), newFakeBackend(map[string]int{"FLASH": 1000})
	addr1, s1 := testkit.ServeHTTP(t, b1.handle)
	addr2, _ := testkit.ServeHTTP(t, b2.handle)
	e := startEdge(t, edgeConfig{backends: []string{addr1, addr2}})
	for i := range 20 {
		if a := e.reserve(t, "FLASH", "a-"+itoa(i)); a.status != 201 {
			t.Fatalf("before the kill: %d %s", a.status, a.body)
		}
	}
	_ = s1.Shutdown()
	for i := range 50 {
		a := e.reserve(t, "FLASH", "b-"+itoa(i))
		if a.status != 201 && a.status != 502 {
			t.Fatalf("with one backend down: %d %s", a.status, a.body)
		}
	}
	testkit.Eventually(t, "killed backend out of service", func() bool { return e.pool.Healthy() == 1 })
	for i := range 50 {
		if a := e.reserve(t, "FLASH", "c-"+itoa(i)); a.status != 201 {
			t.Fatalf("once the dead backend is out, the other must serve: %d %s", a.status, a.body)
		}
	}
	ln := testkit.ListenAgain(t, addr1)
	s1again := &fasthttp.Server{Handler: b1.handle}
	go s1again.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { _ = s1again.Shutdown() })
	testkit.Eventually(t, "backend back in service", func() bool { return e.pool.Healthy() == 2 })
	before := b1.reserves.Load()
	for i := range 50 {
		e.reserve(t, "FLASH", "d-"+itoa(i))
	}
	if b1.reserves.Load() == before {
		t.Fatal("restarted backend gets no reservations")
	}
}
