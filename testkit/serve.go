package testkit

import (
	"net"
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"
)

// ServeHTTP serves h with a plain fasthttp server on a free 127.0.0.1 port until the test ends
// (a fake upstream, a bare server to measure against) and returns its address and server.
func ServeHTTP(t testing.TB, h fasthttp.RequestHandler) (string, *fasthttp.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fasthttp.Server{Handler: h}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { _ = s.Shutdown() })
	return ln.Addr().String(), s
}

// ServeNetHTTP serves s (its Handler, and its IdleTimeout and hooks if set) on a free
// 127.0.0.1 port until the test ends, as a net/http server: a stand-in for a shop's own service
// behind the edge. It returns the address.
func ServeNetHTTP(t testing.TB, s *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { _ = s.Close() })
	return ln.Addr().String()
}
