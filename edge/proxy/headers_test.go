package proxy

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"vouchergate/testkit"
)

// Issue 12, item 6: what of a client's header reaches the upstream.

// headerNames returns the lower-case names of r's headers.
func headerNames(r *fasthttp.Request) map[string]string {
	names := map[string]string{}
	for k, v := range r.Header.All() {
		names[strings.ToLower(string(k))] = string(v)
	}
	return names
}

// The upstream always gets a Host: the target's authority for an absolute-form target (RFC 9112
// §3.2.2), the upstream's address for an HTTP/1.0 request without one; a target with user
// information is refused, never turned into an Authorization header. (Before: no Host header
// upstream for either, and "Authorization: Basic dXNlcjpwYXNz" added by fasthttp.)
func TestUpstreamGetsAHostAndNoUserinfo(t *testing.T) {
	co := &checkout{}
	coAddr, _ := testkit.ServeHTTP(t, co.handle)
	e := startEdge(t, edgeConfig{backends: []string{"127.0.0.1:1"}, checkout: coAddr})

	for _, tt := range []struct{ name, raw, host string }{
		{"HTTP/1.0 without Host", "GET /cart HTTP/1.0\r\n\r\n", coAddr},
		{"absolute form", "GET http://shop.example/cart HTTP/1.1\r\nHost: other.example\r\n\r\n", "shop.example"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if resp := rawRoundTrip(t, e.addr, tt.raw); resp.StatusCode != 418 {
				t.Fatalf("status %d; want the checkout API's 418", resp.StatusCode)
			}
			got := headerNames(co.last.Load())
			if got["host"] != tt.host {
				t.Errorf("upstream Host %q; want %q (headers %v)", got["host"], tt.host, got)
			}
			if tt.host != coAddr && got["x-forwarded-host"] != tt.host {
				t.Errorf("upstream X-Forwarded-Host %q; want %q", got["x-forwarded-host"], tt.host)
			}
		})
	}

	hits := co.hits.Load()
	for _, target := range []string{"http://user:pass@shop.example/cart", "http://user@shop.example/cart", "http://:pass@shop.example/cart"} {
		resp := rawRoundTrip(t, e.addr, "GET "+target+" HTTP/1.1\r\nHost: shop.example\r\n\r\n")
		assertJSONError(t, resp, 400, "BAD_REQUEST")
	}
	if n := co.hits.Load() - hits; n != 0 {
		t.Errorf("%d targets with user information reached the checkout API", n)
	}
}

// Header names that are not tokens are refused; headers only the edge may set, and their
// look-alikes with '_' for '-', never reach the upstream from a client; X-Real-Ip and
// X-Forwarded-Proto are the edge's. (Before: all forwarded as the client sent them, nothing set.)
func TestClientHeadersTheUpstreamMustNotTrust(t *testing.T) {
	co := &checkout{}
	coAddr, _ := testkit.ServeHTTP(t, co.handle)
	e := startEdge(t, edgeConfig{backends: []string{"127.0.0.1:1"}, checkout: coAddr})

	for _, bad := range []string{"X Foo: b", "Transfer Encoding: chunked"} {
		resp := rawRoundTrip(t, e.addr, "GET /cart HTTP/1.1\r\nHost: shop.example\r\n"+bad+"\r\n\r\n")
		assertJSONError(t, resp, 400, "BAD_REQUEST")
	}
	if n := co.hits.Load(); n != 0 {
		t.Fatalf("%d requests with header names that are not tokens reached the checkout API", n)
	}

	resp := rawRoundTrip(t, e.addr, "POST /cart HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 2\r\n"+
		"X_Forwarded_For: 6.6.6.6\r\nContent_Length: 99\r\nX_Real_IP: 6.6.6.6\r\nTransfer_Encoding: chunked\r\n"+
		"X-Real-IP: 6.6.6.6\r\nForwarded: for=6.6.6.6\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.example\r\n"+
		"X_Forwarded_Proto: ftp\r\nX_Forwarded_Host: evil.example\r\nX_Custom: kept\r\n\r\nok")
	if resp.StatusCode != 418 {
		t.Fatalf("status %d; want the checkout API's 418", resp.StatusCode)
	}
	got := headerNames(co.last.Load())
	for _, name := range []string{
		"x_forwarded_for", "content_length", "x_real_ip", "transfer_encoding", "forwarded", "x_forwarded_proto", "x_forwarded_host",
	} {
		if v, ok := got[name]; ok {
			t.Errorf("upstream got %s: %q", name, v)
		}
	}
	for name, want := range map[string]string{
		"x-real-ip": "127.0.0.1", "x-forwarded-proto": "http", "x-forwarded-host": "shop.example",
		"x-forwarded-for": "127.0.0.1", "x_custom": "kept",
	} {
		if got[name] != want {
			t.Errorf("upstream %s: %q; want %q (headers %v)", name, got[name], want, got)
		}
	}
	if body := string(co.last.Load().Body()); body != "ok" {
		t.Errorf("upstream body %q; want \"ok\"", body)
	}
}

// A request whose header ends a line with a bare LF is refused at once, however it is sent.
// (Before: fasthttp took the request line and waited for a CRLF CRLF: 408 after the timeout.)
func TestBareLFIsRefusedAtOnce(t *testing.T) {
	t.Run("no cap per address", func(t *testing.T) { bareLFIsRefusedAtOnce(t, 0) })
	// The edge's listener counts the connection then (ClientListener).
	t.Run("capped per address", func(t *testing.T) { bareLFIsRefusedAtOnce(t, 16) })
}

func bareLFIsRefusedAtOnce(t *testing.T, perIP int) {
	co := &checkout{}
	coAddr, _ := testkit.ServeHTTP(t, co.handle)
	e := startEdge(t, edgeConfig{backends: []string{"127.0.0.1:1"}, checkout: coAddr, perIP: perIP})
	for _, raw := range []string{
		"GET /cart HTTP/1.1\nHost: shop.example\n\n",
		"GET /cart HTTP/1.1\r\nHost: shop.example\n\r\n",
		"GET /cart HTTP/1.1\r\nHost: shop.example\r\n\n",
	} {
		c := dialRawProxy(t, e.addr)
		if _, err := c.Write([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		line, err := c.r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 400 ") {
			t.Errorf("%q: first answer line %q, %v; want a 400", raw, line, err)
		}
	}
	// A body may hold bare LFs; the request after it on the connection is looked at again.
	c := dialRawProxy(t, e.addr)
	body := "a\nb\n\nc"
	_, _ = c.Write([]byte("POST /cart HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 6\r\n\r\n" + body))
	if line, _ := c.r.ReadString('\n'); !strings.HasPrefix(line, "HTTP/1.1 418 ") {
		t.Fatalf("a body with bare LFs: %q; want the checkout API's 418", line)
	}
	if got := string(co.last.Load().Body()); got != body {
		t.Fatalf("upstream body %q; want %q", got, body)
	}
	drainAnswer(t, c)
	_, _ = c.Write([]byte("GET /cart HTTP/1.1\nHost: shop.example\n\n"))
	if line, _ := c.r.ReadString('\n'); !strings.HasPrefix(line, "HTTP/1.1 400 ") {
		t.Fatalf("a bare-LF request after a good one: %q; want a 400", line)
	}

	// Pipelined in one write behind requests with and without a body: the good ones are
	// answered, the bare-LF one gets its 400 at once. (Before: it waited for the read timeout.)
	c = dialRawProxy(t, e.addr)
	_, _ = c.Write([]byte("POST /cart HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 6\r\n\r\n" + body +
		"GET /cart HTTP/1.1\r\nHost: shop.example\r\n\r\n" + "GET /cart HTTP/1.1\r\nHost: shop.example\nX: y\r\n\r\n"))
	for i, want := range []string{"HTTP/1.1 418 ", "HTTP/1.1 418 ", "HTTP/1.1 400 "} {
		line, err := c.r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, want) {
			t.Fatalf("pipelined answer %d: %q, %v; want %q", i+1, line, err, want)
		}
		if i < 2 {
			drainAnswer(t, c)
		}
	}
}
