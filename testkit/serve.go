package testkit

import (
	"net"
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
