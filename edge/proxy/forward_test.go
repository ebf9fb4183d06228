package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/testkit"
)

// checkout records the last request it got and answers what the request asks for.
type checkout struct {
	last atomic.Pointer[fasthttp.Request]
	hits atomic.Int32
}

func (c *checkout) handle(ctx *fasthttp.RequestCtx) {
	if string(ctx.Path()) == "/healthz" {
		return
	}
	c.hits.Add(1)
	var r fasthttp.Request
	ctx.Request.CopyTo(&r)
	c.last.Store(&r)
	ctx.SetStatusCode(418)
	ctx.Response.Header.Set("X-Upstream", "checkout")
	ctx.Response.Header.Add("Set-Cookie", "a=1")
	ctx.Response.Header.Add("Set-Cookie", "b=2")
	ctx.Response.Header.Set("Keep-Alive", "timeout=5")
	ctx.Response.Header.Set("Connection", "X-Hop-Answer")
	ctx.Response.Header.Set("X-Hop-Answer", "secret")
	ctx.SetContentType("text/plain")
	ctx.SetBody(append([]byte("echo:"), ctx.PostBody()...))
}

// rawRoundTrip writes raw to addr and reads one answer.
func rawRoundTrip(t *testing.T, addr, raw string) *http.Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestCheckoutPathsPassThrough(t *testing.T) {
	co := &checkout{}
	coAddr, _ := testkit.ServeHTTP(t, co.handle)
	b := newFakeBackend(nil)
	bAddr, _ := testkit.ServeHTTP(t, b.handle)
	e := startEdge(t, edgeConfig{backends: []string{bAddr}, checkout: coAddr})

	body := "name=caf%C3%A9&qty=2\x00binary\xff"
	raw := "PATCH /cart/items/42;v=1?x=1&y=%2F&y=2 HTTP/1.1\r\n" +
		"Host: shop.example\r\n" +
		"X-Custom: Some Value\r\n" +
		"X-Multi: one\r\n" +
		"X-Multi: two\r\n" +
		"Cookie: sid=abc\r\n" +
		"Authorization: Bearer user-token\r\n" +
		"X-Forwarded-For: 203.0.113.7\r\n" +
		"X-Forwarded-For: 198.51.100.2, 10.0.0.1\r\n" +
		"Connection: keep-alive, X-Hop\r\n" +
		"X-Hop: must-not-pass\r\n" +
		"Keep-Alive: timeout=5\r\n" +
		"Te: trailers\r\n" +
		"Upgrade: websocket\r\n" +
		"Proxy-Authorization: Basic eDp5\r\n" +
		"Content-Type: application/x-www-form-urlencoded\r\n" +
		"Content-Length: " + itoa(len(body)) + "\r\n\r\n" + body
	resp := rawRoundTrip(t, e.addr, raw)

	got := co.last.Load()
	if got == nil {
		t.Fatal("checkout API got nothing")
	}
	checks := []struct{ what, got, want string }{
		{"method", string(got.Header.Method()), "PATCH"},
		{"request URI", string(got.RequestURI()), "/cart/items/42;v=1?x=1&y=%2F&y=2"},
		{"Host", string(got.Host()), "shop.example"},
		{"X-Custom", string(got.Header.Peek("X-Custom")), "Some Value"},
		{"Cookie", string(got.Header.Peek("Cookie")), "sid=abc"},
		{"Authorization", string(got.Header.Peek("Authorization")), "Bearer user-token"},
		{"Content-Type", string(got.Header.ContentType()), "application/x-www-form-urlencoded"},
		{"body", string(got.Body()), body},
		{"X-Forwarded-For", strings.Join(peekAll(got, "X-Forwarded-For"), "|"), "203.0.113.7, 198.51.100.2, 10.0.0.1, 127.0.0.1"},
		{"X-Multi", strings.Join(peekAll(got, "X-Multi"), "|"), "one|two"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("checkout got %s %q; want %q", c.what, c.got, c.want)
		}
	}
	for _, hop := range []string{"X-Hop", "Keep-Alive", "Te", "Upgrade", "Proxy-Authorization"} {
		if v := got.Header.Peek(hop); v != nil {
			t.Errorf("hop-by-hop header %s: %q passed to the checkout API", hop, v)
		}
	}
	if c := string(got.Header.Peek("Connection")); c != "" && c != "keep-alive" {
		t.Errorf("Connection passed as %q", c)
	}
	if id := got.Header.Peek("X-Request-Id"); !validRequestID(id) {
		t.Errorf("no request id passed along: %q", id)
	}

	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 418 || string(answer) != "echo:"+body {
		t.Errorf("answer %d %q; want the checkout API's 418 and body", resp.StatusCode, answer)
	}
	if resp.Header.Get("X-Upstream") != "checkout" || len(resp.Header.Values("Set-Cookie")) != 2 || resp.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("answer headers changed: %v", resp.Header)
	}
	for _, hop := range []string{"Keep-Alive", "X-Hop-Answer"} {
		if v := resp.Header.Get(hop); v != "" {
			t.Errorf("hop-by-hop answer header %s: %q passed to the client", hop, v)
		}
	}
	if resp.Header.Get("X-Request-Id") != string(got.Header.Peek("X-Request-Id")) {
		t.Errorf("answer's request id %q differs from the one passed along", resp.Header.Get("X-Request-Id"))
	}
	if b.reserves.Load()+b.other.Load() != 0 {
		t.Error("a checkout request reached the backend")
	}
}

func peekAll(r *fasthttp.Request, key string) []string {
	var out []string
	for _, v := range r.Header.PeekAll(key) {
		out = append(out, string(v))
	}
	return out
}

func itoa(n int) string { return string(fasthttp.AppendUint(nil, n)) }

func TestClientRequestIDIsKept(t *testing.T) {
	b := newFakeBackend(map[string]int{"FLASH": 5})
	addr, _ := testkit.ServeHTTP(t, b.handle)
	e := startEdge(t, edgeConfig{backends: []string{addr}})
	a := e.do(t, "POST", "/vouchers/FLASH/reservations", `{"customerId":"c","orderId":"o-1","orderAmount":1}`, "X-Request-Id", "client-id-123")
	if a.status != 201 || string(a.header.Peek("X-Request-Id")) != "client-id-123" {
		t.Fatalf("answer %d with request id %q", a.status, a.header.Peek("X-Request-Id"))
	}
	if got := string(b.lastReq.Load().Header.Peek("X-Request-Id")); got != "client-id-123" {
		t.Fatalf("backend got request id %q", got)
	}
	a = e.do(t, "POST", "/vouchers/FLASH/reservations", `{"customerId":"c","orderId":"o-2","orderAmount":1}`, "X-Request-Id", "bad id\twith junk")
	if got := string(b.lastReq.Load().Header.Peek("X-Request-Id")); got == "bad id\twith junk" || !validRequestID([]byte(got)) {
		t.Fatalf("a junk request id passed as %q", got)
	}
}

func TestRoutesAndBadInput(t *testing.T) {
	b := newFakeBackend(map[string]int{"FLASH": 5})
	addr, _ := testkit.ServeHTTP(t, b.handle)
	local := func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("local") }
	e := startEdge(t, edgeConfig{backends: []string{addr}, maxAPI: 512, local: local}) // no checkout API
	huge := `{"orderId":"o","pad":"` + strings.Repeat("x", 600) + `"}`
	tests := []struct {
		method, uri, body string
		status            int
		code              string // error code, or "" for a forwarded or local answer
		allow             string
	}{
		{"GET", "/admin/vouchers/FLASH", "", 404, "NOT_FOUND", ""},
		{"POST", "/admin/vouchers", `{}`, 404, "NOT_FOUND", ""},
		{"GET", "/admin", "", 404, "NOT_FOUND", ""},
		{"GET", "/vouchers/FLASH/../../admin/vouchers", "", 404, "NOT_FOUND", ""},
		{"GET", "/vouchers/FLASH/state", "", 404, "NOT_FOUND", ""},
		{"GET", "/vouchers/FLASH/reservations", "", 405, "METHOD_NOT_ALLOWED", "POST"},
		{"PUT", "/vouchers/FLASH/reservations/o-1/confirm", "", 405, "METHOD_NOT_ALLOWED", "POST"},
		{"POST", "/vouchers/FLASH/reservations/o-1", "", 405, "METHOD_NOT_ALLOWED", "DELETE"},
		{"POST", "/vouchers/fl%C3%A4sh/reservations", `{}`, 400, "BAD_REQUEST", ""},
		{"POST", "/vouchers/" + strings.Repeat("A", 33) + "/reservations", `{}`, 400, "BAD_REQUEST", ""},
		{"DELETE", "/vouchers/FLASH/reservations/" + strings.Repeat("o", 65), "", 400, "BAD_REQUEST", ""},
		{"POST", "/vouchers/FLASH/reservations/x/unknown", "", 404, "NOT_FOUND", ""},
		{"POST", "/vouchers/FLASH", "", 404, "NOT_FOUND", ""},
		{"POST", "/vouchers", "", 404, "NOT_FOUND", ""},
		{"POST", "/vouchers/FLASH/reservations", huge, 413, "PAYLOAD_TOO_LARGE", ""},
		{"GET", "/quotas/deduct", "", 405, "METHOD_NOT_ALLOWED", "POST"},
		{"GET", "/quotas/other", "", 404, "NOT_FOUND", ""},
		{"GET", "/cart", "", 404, "NOT_FOUND", ""}, // no checkout API configured
		{"TRACE", "/cart", "", 405, "METHOD_NOT_ALLOWED", ""},
		{"POST", "/readyz", "", 405, "METHOD_NOT_ALLOWED", "GET"},
		{"GET", "/readyz", "", 200, "", ""},
		{"GET", "/quotas/usage?businessLine=shop", "", 200, "", ""},
		{"POST", "/vouchers/FLASH/reservations/o-1/confirm", "", 200, "", ""},
		{"DELETE", "/vouchers/FLASH/reservations/o-1", "", 200, "", ""},
	}
	for _, tt := range tests {
		a := e.do(t, tt.method, tt.uri, tt.body)
		if a.status != tt.status {
			t.Errorf("%s %s: status %d %s; want %d", tt.method, tt.uri, a.status, a.body, tt.status)
			continue
		}
		if tt.code != "" {
			if got := errorCode(t, a); got != tt.code {
				t.Errorf("%s %s: error %q; want %q", tt.method, tt.uri, got, tt.code)
			}
		}
		if tt.allow != "" && string(a.header.Peek("Allow")) != tt.allow {
			t.Errorf("%s %s: Allow %q; want %q", tt.method, tt.uri, a.header.Peek("Allow"), tt.allow)
		}
	}
	if n := b.reserves.Load(); n != 0 {
		t.Errorf("backend saw %d reservations from refused requests", n)
	}
	if n := b.other.Load(); n != 3 {
		t.Errorf("backend saw %d other requests; want the 3 good ones", n)
	}
}

func TestOversizedRequestsGetJSON4xx(t *testing.T) {
	b := newFakeBackend(map[string]int{"FLASH": 5})
	addr, _ := testkit.ServeHTTP(t, b.handle)
	co := &checkout{}
	coAddr, _ := testkit.ServeHTTP(t, co.handle)
	e := startEdge(t, edgeConfig{backends: []string{addr}, checkout: coAddr, maxBody: 4096, maxHeader: 2048})

	resp := rawRoundTrip(t, e.addr, "POST /cart HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("x", 100))
	assertJSONError(t, resp, 413, "PAYLOAD_TOO_LARGE")
	resp = rawRoundTrip(t, e.addr, "GET /cart HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("y", 4000)+"\r\n\r\n")
	assertJSONError(t, resp, 431, "HEADER_TOO_LARGE")
	resp = rawRoundTrip(t, e.addr, "NOT A REQUEST\r\n\r\n")
	if resp.StatusCode != 400 {
		t.Errorf("garbage request: status %d; want 400", resp.StatusCode)
	}
	if co.hits.Load() != 0 {
		t.Error("an oversized request reached the checkout API")
	}
}

func assertJSONError(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status || !strings.Contains(string(body), `"error":"`+code+`"`) || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("answer %d %s %q; want %d with JSON error %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, status, code)
	}
}
