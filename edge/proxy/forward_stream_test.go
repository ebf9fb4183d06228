package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/edge/upstream"
	"vouchergate/testkit"
)

// The pass-through to the checkout API, each behaviour of the table a buffering proxy with one
// timeout broke against a checkout API process of its own (testkit.StartCheckoutStandIn);
// answers without bodies and connection reuse against an in-process net/http server.

// serveNetHTTP runs h on a net/http server on a free 127.0.0.1 port until the test ends, with
// idle (its keep-alive idle timeout; 0: net/http's default), and counts the connections it
// accepted.
func serveNetHTTP(t *testing.T, idle time.Duration, h http.HandlerFunc) (addr string, conns *atomic.Int32) {
	t.Helper()
	conns = new(atomic.Int32)
	return testkit.ServeNetHTTP(t, &http.Server{Handler: h, IdleTimeout: idle, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}}), conns
}

// passThroughEdge is an edge whose checkout API is addr, and no backend.
func passThroughEdge(t *testing.T, addr string, c edgeConfig) *edge {
	t.Helper()
	c.backends, c.checkout = []string{"127.0.0.1:1"}, addr
	if c.maxResp == 0 {
		c.maxResp = -1 // no cap
	}
	return startEdge(t, c)
}

// httpClient is a client of the edge with its own connections.
func httpClient() *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
}

// An answer larger than the old 4 MiB cap streams whole, and its first byte reaches the client
// when the checkout API process sends it, not when the answer ends. (Before: 502; 3 MiB at
// 1 MiB/s: first byte after 2.94 s.)
func TestLargeAnswersStreamFromTheirFirstByte(t *testing.T) {
	up := testkit.StartCheckoutStandIn(t, 0)
	e := passThroughEdge(t, up.Addr, edgeConfig{})
	client := httpClient()

	resp, err := client.Get("http://" + e.addr + "/big?size=" + fmt.Sprint(6<<20))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || n != 6<<20 {
		t.Fatalf("6 MiB answer: status %d, %d bytes, %v", resp.StatusCode, n, err)
	}

	start := time.Now()
	resp, err = client.Get("http://" + e.addr + "/slow?size=" + fmt.Sprint(3<<20) + "&piece=65536&every=62.5ms") // 1 MiB/s
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	firstByte := time.Since(start)
	n, err = io.Copy(io.Discard, resp.Body)
	t.Logf("3 MiB at 1 MiB/s: first byte after %v, last after %v", firstByte.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if err != nil || n != 3<<20-1 {
		t.Fatalf("3 MiB answer: %d bytes, %v", n+1, err)
	}
	if firstByte > time.Second {
		t.Fatalf("first byte after %v; want it as the upstream sent it (the whole answer takes 3 s)", firstByte)
	}
}

// With a cap on answers (VG_EDGE_MAX_RESPONSE_BYTES), a streamed answer that says no length
// (chunked) is cut where it passes the cap: the client gets no more than the cap and no end of
// the answer, so it cannot take the cut answer for a whole one; one under the cap passes whole.
// (One whose Content-Length is over the cap is a 502 before any of it goes out:
// TestUpstreamFailuresGetJSONGatewayErrors.)
func TestAStreamedAnswerIsCutAtTheCap(t *testing.T) {
	const limit = 256 << 10
	up := testkit.StartCheckoutStandIn(t, 0)
	e := passThroughEdge(t, up.Addr, edgeConfig{maxResp: limit})
	for _, tt := range []struct {
		size  int
		whole bool
	}{{limit / 2, true}, {4 * limit, false}} {
		resp, err := httpClient().Get(fmt.Sprintf("http://%s/export?size=%d&piece=%d&chunked=1", e.addr, tt.size, 16<<10))
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t.Logf("a chunked answer of %d KiB under a cap of %d KiB: %d, %d KiB relayed, %v", tt.size>>10, limit>>10, resp.StatusCode, n>>10, err)
		switch {
		case resp.StatusCode != 200 || len(resp.TransferEncoding) == 0:
			t.Fatalf("%d KiB: %d %v; want 200, chunked", tt.size>>10, resp.StatusCode, resp.TransferEncoding)
		case tt.whole && (err != nil || n != int64(tt.size)):
			t.Fatalf("%d KiB under the cap: %d bytes, %v; want all of it", tt.size>>10, n, err)
		case !tt.whole && (err == nil || n > limit):
			t.Fatalf("%d KiB over the cap: %d bytes, %v; want at most %d and the answer cut", tt.size>>10, n, err, limit)
		}
	}
}

// Server-sent events from an upstream process reach the client one by one as it sends them:
// it sends the next only once the client got the one before (acknowledged to the process
// directly), so a proxy that held them back would stall (the test's deadline); then a stream
// longer than any read timeout runs on while events flow. (Before: delivered only at the end; a
// 15 s stream cut with a 504 at 10 s.)
func TestServerSentEventsArriveAsSent(t *testing.T) {
	up := testkit.StartCheckoutStandIn(t, 0)
	// A read timeout of 500 ms, shorter than the stream (about 1.6 s): it bounds the pauses.
	e := passThroughEdge(t, up.Addr, edgeConfig{timeout: 500 * time.Millisecond})
	resp, err := httpClient().Get("http://" + e.addr + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("answer %d %q", resp.StatusCode, ct)
	}
	r := bufio.NewReader(resp.Body)
	for i := range 8 {
		deadline := time.AfterFunc(3*time.Second, func() { resp.Body.Close() })
		var event string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("event %d: %v (the edge did not pass it on as sent)", i, err)
			}
			if line == "\n" {
				break
			}
			event += line
		}
		deadline.Stop()
		if want := fmt.Sprintf("id: %d\ndata: event %d\n", i, i); event != want {
			t.Fatalf("event %q; want %q", event, want)
		}
		up.Ack(t)
	}
}

// A slow client reading 4 MiB at 512 KiB/s (8 s) from the checkout API process gets all of it
// with a 4 s send timeout: the timeout bounds each write, not the answer. (Before: cut when the
// 5 s write limit ran out.) The timeout must stay well above a second or two: a writer blocked
// on a full socket is woken only once half of what is queued has gone, which at 512 KiB/s can
// take a while.
func TestASlowReaderGetsTheWholeAnswer(t *testing.T) {
	const size = 4 << 20
	up := testkit.StartCheckoutStandIn(t, 0)
	e := passThroughEdge(t, up.Addr, edgeConfig{writeIdle: 4 * time.Second})
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(64 << 10)
	fmt.Fprintf(conn, "GET /download?size=%d&piece=%d HTTP/1.1\r\nHost: shop.example\r\n\r\n", size, 256<<10)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	start, got := time.Now(), 0
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		got += n
		if err != nil {
			if err != io.EOF {
				t.Fatalf("after %d bytes: %v", got, err)
			}
			break
		}
		if ahead := time.Duration(got) * time.Second / (512 << 10); ahead > time.Since(start) {
			time.Sleep(ahead - time.Since(start)) // 512 KiB/s
		}
	}
	t.Logf("%d bytes read in %v", got, time.Since(start).Round(time.Millisecond))
	if got != size {
		t.Fatalf("read %d bytes; want %d", got, size)
	}
}

// Timeouts by path prefix, against the checkout API process: a long poll under /poll/ waits for
// its answer up to its own read timeout, while other paths keep the default; a total bounds a
// call however it trickles. (Before: one total for every path, 10 s.)
func TestTimeoutsByPathPrefix(t *testing.T) {
	up := testkit.StartCheckoutStandIn(t, 0)
	e := passThroughEdge(t, up.Addr, edgeConfig{checkout2: upstream.CheckoutOptions{Timeouts: []upstream.PathTimeout{
		{Prefix: "/poll/", ReadIdle: 3 * time.Second},
		{Prefix: "/export", ReadIdle: 300 * time.Millisecond, Total: 700 * time.Millisecond},
		{ReadIdle: 300 * time.Millisecond},
	}}})
	if a := e.do(t, "GET", "/poll/orders?wait=1s", ""); a.status != 200 || a.body != "GET " {
		t.Errorf("long poll: %d %s; want its answer after 1 s", a.status, a.body)
	}
	if a := e.do(t, "GET", "/cart?wait=1s", ""); a.status != 504 || errorCode(t, a) != CodeGatewayTimeout {
		t.Errorf("a page silent for 1 s: %d %s; want 504 after its 300 ms read timeout", a.status, a.body)
	}
	start := time.Now()
	// 400 KiB in pieces of 10 KiB every 50 ms: 2 s, each read well within its 300 ms.
	resp, err := httpClient().Get("http://" + e.addr + "/export?size=409600&piece=10240&every=50ms")
	if err == nil && resp.StatusCode != 200 {
		t.Fatalf("export: %d", resp.StatusCode)
	}
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err == nil || time.Since(start) > 1500*time.Millisecond {
		t.Errorf("a 2 s answer under a 700 ms total: %v after %v; want cut at the total", err, time.Since(start))
	}
}

// A client that gives up cancels its call: the checkout API process sees its request's
// connection close. (Before: the upstream call ran on to its end.)
func TestAClientGivingUpCancelsTheUpstreamCall(t *testing.T) {
	up := testkit.StartCheckoutStandIn(t, 0)
	e := passThroughEdge(t, up.Addr, edgeConfig{timeout: 20 * time.Second})
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /report?wait=8s HTTP/1.1\r\nHost: shop.example\r\n\r\n")
	time.Sleep(time.Second)
	conn.Close()
	cancelledWithin(t, up, time.Now(), "while it waited for its answer")
}

// A client that goes away while its answer streams, in a silence of the checkout API (an event
// stream between events), cancels the call too: the checkout API process sees its connection
// close well before it would write again. (Before: only a failed write to the client cut it, so
// the call ran on until the checkout API sent its next byte.)
func TestAClientGivingUpDuringASilentStreamCancelsTheUpstreamCall(t *testing.T) {
	up := testkit.StartCheckoutStandIn(t, 0)
	e := passThroughEdge(t, up.Addr, edgeConfig{timeout: 20 * time.Second})
	c := dialRawProxy(t, e.addr)
	fmt.Fprintf(c, "GET /events/orders?first=1&wait=8s HTTP/1.1\r\nHost: shop.example\r\n\r\n")
	for { // the header and the first event: the answer streams
		line, err := c.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, "data: first") {
			break
		}
	}
	c.Close()
	cancelledWithin(t, up, time.Now(), "mid-stream")
}

// cancelledWithin waits for the checkout API process to count the call cancelled, up to 5 s
// after its client left at left (it would answer after 8 s).
func cancelledWithin(t *testing.T, up *testkit.CheckoutStandIn, left time.Time, when string) {
	t.Helper()
	for up.Stats(t).Cancelled == 0 {
		if time.Since(left) > 5*time.Second {
			t.Fatalf("the upstream call was not cancelled 5 s after its client went away %s", when)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("upstream call cancelled %v after its client went away %s", time.Since(left).Round(10*time.Millisecond), when)
}

// The headers the edge sets cannot be named away by a client's Connection header: hop-by-hop
// removal comes first, then the edge sets its own. (Before: Connection: X-Forwarded-Proto,
// X-Real-Ip, X-Forwarded-Host, Host removed them, and Host became the upstream's address.)
func TestConnectionCannotNameTheEdgesHeadersAway(t *testing.T) {
	co := &checkout{}
	coAddr, _ := testkit.ServeHTTP(t, co.handle)
	e := startEdge(t, edgeConfig{backends: []string{"127.0.0.1:1"}, checkout: coAddr})
	status, body := testkit.RawHTTP(t, e.addr, "GET /cart HTTP/1.1\r\nHost: shop.example\r\n"+
		"Connection: X-Forwarded-Proto, X-Real-Ip, X-Forwarded-Host, Host, X-Forwarded-For, X-Request-Id\r\n\r\n")
	if status != 418 {
		t.Fatalf("answer %d %s", status, body)
	}
	got := headerNames(co.last.Load())
	for name, want := range map[string]string{
		"host": "shop.example", "x-forwarded-host": "shop.example", "x-forwarded-proto": "http",
		"x-real-ip": "127.0.0.1", "x-forwarded-for": "127.0.0.1",
	} {
		if got[name] != want {
			t.Errorf("upstream %s: %q; want %q (headers %v)", name, got[name], want, got)
		}
	}
	if !validRequestID([]byte(got["x-request-id"])) {
		t.Errorf("upstream X-Request-Id %q", got["x-request-id"])
	}
}

// An answer's header from the checkout API process is limited by its own setting (64 KB by
// default), not by the request's: an 8 KB header passes, one over the limit is a 502. (Before:
// 502 past VG_MAX_HEADER_BYTES.)
func TestAnswerHeadersHaveTheirOwnLimit(t *testing.T) {
	up := testkit.StartCheckoutStandIn(t, 0)
	e := passThroughEdge(t, up.Addr, edgeConfig{maxHeader: 8192})
	resp, err := httpClient().Get("http://" + e.addr + "/big?header=" + fmt.Sprint(8<<10))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(resp.Header.Get("X-Big")) != 8<<10 {
		t.Errorf("8 KB header: %d, X-Big of %d bytes", resp.StatusCode, len(resp.Header.Get("X-Big")))
	}
	if a := e.do(t, "GET", "/huge?header="+fmt.Sprint(80<<10), ""); a.status != 502 || errorCode(t, a) != CodeBadGateway {
		t.Errorf("80 KB header: %d %s; want 502", a.status, a.body)
	}
}

// Answers without a body keep their header, and the connections on both sides stay usable:
// HEAD (its Content-Length says what GET would send), 204, 304; a gzip body passes untouched;
// 1,000 requests in a row reuse one upstream connection.
func TestAnswersWithoutBodiesAndKeepAlive(t *testing.T) {
	gz := []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 1, 2, 3}
	addr, conns := serveNetHTTP(t, 0, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/page":
			w.Header().Set("Content-Length", "11")
			w.Header().Set("ETag", `"v1"`)
			if r.Method != "HEAD" {
				fmt.Fprint(w, "hello world")
			}
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/cached":
			w.WriteHeader(http.StatusNotModified)
		case "/gz":
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(gz)
		}
	})
	e := passThroughEdge(t, addr, edgeConfig{})
	c := dialRawProxy(t, e.addr)
	for _, tt := range []struct {
		method, path string
		status       int
		length, body string
	}{
		{"HEAD", "/page", 200, "11", ""},
		{"GET", "/empty", 204, "", ""},
		{"GET", "/cached", 304, "", ""},
		{"GET", "/page", 200, "11", "hello world"},
		{"GET", "/gz", 200, fmt.Sprint(len(gz)), string(gz)},
	} {
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: shop.example\r\n\r\n", tt.method, tt.path)
		resp, err := http.ReadResponse(c.r, &http.Request{Method: tt.method})
		if err != nil {
			t.Fatalf("%s %s: %v", tt.method, tt.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || resp.Header.Get("Content-Length") != tt.length || string(body) != tt.body {
			t.Errorf("%s %s: %d, Content-Length %q, body %q; want %d, %q, %q",
				tt.method, tt.path, resp.StatusCode, resp.Header.Get("Content-Length"), body, tt.status, tt.length, tt.body)
		}
	}
	for range 1000 {
		fmt.Fprintf(c, "GET /page HTTP/1.1\r\nHost: shop.example\r\n\r\n")
		resp, err := http.ReadResponse(c.r, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("the upstream accepted %d connections for 1,005 requests in a row; want 1", n)
	}
}
