package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/edge/soldout"
	"vouchergate/edge/token"
	"vouchergate/edge/upstream"
	"vouchergate/shared/events"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// fakeBackend speaks the backend's wire contract for flash vouchers, in memory: reservations
// take uses until none is left, a retry of a granted order gets its 201 again, and
// /vouchers/{code}/state reports the holders.
type fakeBackend struct {
	mu       sync.Mutex
	limit    map[string]int
	granted  map[string]map[string]bool // code -> orderIds
	reserves atomic.Int32               // reservation requests seen
	other    atomic.Int32               // other requests seen
	lastReq  atomic.Pointer[fasthttp.Request]
}

func newFakeBackend(limits map[string]int) *fakeBackend {
	b := &fakeBackend{limit: limits, granted: map[string]map[string]bool{}}
	for code := range limits {
		b.granted[code] = map[string]bool{}
	}
	return b
}

func (b *fakeBackend) handle(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	ctx.SetContentType("application/json")
	if path == "/healthz" {
		ctx.SetBodyString(`{"status":"ok"}`)
		return
	}
	var copyReq fasthttp.Request
	ctx.Request.CopyTo(&copyReq)
	b.lastReq.Store(&copyReq)
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case len(parts) == 3 && parts[0] == "vouchers" && parts[2] == "reservations":
		b.reserves.Add(1)
		b.reserve(ctx, parts[1])
	case len(parts) == 3 && parts[0] == "vouchers" && parts[2] == "state":
		b.other.Add(1)
		b.state(ctx, parts[1])
	default:
		b.other.Add(1)
		ctx.SetStatusCode(200)
		ctx.SetBodyString(`{"path":"` + path + `"}`)
	}
}

func (b *fakeBackend) reserve(ctx *fasthttp.RequestCtx, code string) {
	var req wire.ReserveRequest
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil || req.OrderID == "" {
		ctx.SetStatusCode(400)
		ctx.SetBodyString(`{"error":"BAD_REQUEST","message":"bad body"}`)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	holders, ok := b.granted[code]
	switch {
	case !ok:
		ctx.SetStatusCode(404)
		ctx.SetBodyString(`{"error":"VOUCHER_NOT_FOUND"}`)
	case holders[req.OrderID]:
		ctx.SetStatusCode(201)
		ctx.SetBodyString(`{"orderId":"` + req.OrderID + `","discountAmount":100}`)
	case len(holders) >= b.limit[code]:
		ctx.SetStatusCode(409)
		ctx.SetBodyString(`{"error":"OUT_OF_STOCK","message":"no use left"}`)
	default:
		holders[req.OrderID] = true
		ctx.SetStatusCode(201)
		ctx.SetBodyString(`{"orderId":"` + req.OrderID + `","discountAmount":100}`)
	}
}

func (b *fakeBackend) state(ctx *fasthttp.RequestCtx, code string) {
	b.mu.Lock()
	s := events.VoucherState{Code: code, At: time.Now().UTC()}
	if holders, ok := b.granted[code]; ok && len(holders) >= b.limit[code] {
		ids := make([]string, 0, len(holders))
		for id := range holders {
			ids = append(ids, id)
		}
		s.SoldOut, s.Holders = true, events.NewHolderFilter(ids)
	}
	b.mu.Unlock()
	payload, _ := s.Encode()
	ctx.SetContentType("application/json")
	ctx.SetBody(payload)
}

func (b *fakeBackend) release(code, order string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.granted[code], order)
}

// edge is a Proxy served on 127.0.0.1 with its cache, pool and refresher.
type edge struct {
	addr      string
	proxy     *Proxy
	cache     *soldout.Cache
	pool      *upstream.Pool
	refresher *soldout.Refresher
	client    *fasthttp.HostClient
	conns     *conns // the client connections its listener counts
}

type edgeConfig struct {
	backends  []string
	checkout  string
	timeout   time.Duration
	maxAPI    int
	maxBody   int
	maxHeader int
	maxResp   int
	local     fasthttp.RequestHandler
	slots     int           // reservations at the backends at once; 0: unbounded
	slotWait  time.Duration // waiting for one
	tokens    *token.Verifier
	apiKey    string
	perIP     int                             // open connections from one address; 0: no cap
	maxConns  int                             // open connections in all; 0: no cap
	listen    func(net.Listener) net.Listener // wraps the TCP listener under ClientListener (TLS); nil: none
	checkout2 upstream.CheckoutOptions        // the checkout client's, over what startEdge sets (forward_stream_test.go)
	trusted   []netip.Prefix
	writeIdle time.Duration
}

func startEdge(t testing.TB, c edgeConfig) *edge {
	t.Helper()
	if c.timeout == 0 {
		c.timeout = 2 * time.Second
	}
	if c.maxAPI == 0 {
		c.maxAPI = 8192
	}
	if c.maxBody == 0 {
		c.maxBody = 1 << 20
	}
	if c.maxHeader == 0 {
		c.maxHeader = 8192
	}
	if c.maxResp == 0 {
		c.maxResp = 1 << 20
	}
	clientOpts := upstream.Options{DialTimeout: 300 * time.Millisecond, ConnWait: 100 * time.Millisecond, MaxConns: 64, MaxHeaderBytes: 8192, MaxBodyBytes: c.maxResp, IdleTimeout: 10 * time.Second}
	pool := upstream.NewPool(c.backends, make([]bool, len(c.backends)), upstream.PoolOptions{
		Client: clientOpts, HealthEvery: 100 * time.Millisecond, HealthTimeout: 300 * time.Millisecond, HealthFalls: 2,
	}, testkit.QuietLog)
	t.Cleanup(pool.Close)
	cache := soldout.New(soldout.Options{TTL: time.Minute})
	refresher := soldout.NewRefresher(cache, pool, 50*time.Millisecond, time.Second, testkit.QuietLog)
	t.Cleanup(refresher.Close)
	o := Options{
		Backends: pool, SoldOut: cache, Refresher: refresher, Local: c.local,
		BackendTimeout: c.timeout, MaxCheckoutAnswer: c.maxResp, WriteIdle: c.writeIdle, TrustedProxies: c.trusted,
		MaxAPIBodyBytes: c.maxAPI, MaxBodyBytes: c.maxBody,
		MaxUpstreamHead: c.maxHeader + 1024, Log: testkit.QuietLog,
		ReserveSlots: c.slots, ReserveWait: c.slotWait, Tokens: c.tokens, APIKey: c.apiKey,
	}
	if c.checkout != "" {
		o.Checkout = newTestCheckout(t, c.checkout, c.timeout, c.checkout2)
	}
	p := New(o)
	srv := NewServer(p, ServerOptions{ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: 10 * time.Second, MaxHeaderBytes: c.maxHeader, MaxBodyBytes: c.maxBody})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if c.listen != nil {
		ln = c.listen(ln)
	}
	cl := ClientListener(ln, Caps{MaxConnsPerIP: c.perIP, MaxConns: c.maxConns})
	go srv.Serve(cl) //nolint:errcheck
	t.Cleanup(func() { _ = srv.Shutdown() })
	return &edge{
		addr: addr, proxy: p, cache: cache, pool: pool, refresher: refresher, conns: cl.(clientListener).conns,
		client: &fasthttp.HostClient{Addr: addr, MaxConns: 256, ReadTimeout: 10 * time.Second, DisablePathNormalizing: true},
	}
}

type answerOf struct {
	status int
	body   string
	header *fasthttp.ResponseHeader
}

func (e *edge) do(t testing.TB, method, uri, body string, headers ...string) answerOf {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("http://" + e.addr + uri)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	if body != "" {
		req.SetBodyString(body)
		req.Header.SetContentType("application/json")
	}
	if err := e.client.DoTimeout(req, resp, 10*time.Second); err != nil {
		t.Fatalf("%s %s: %v", method, uri, err)
	}
	h := &fasthttp.ResponseHeader{}
	resp.Header.CopyTo(h)
	return answerOf{status: resp.StatusCode(), body: string(resp.Body()), header: h}
}

func (e *edge) reserve(t testing.TB, code, order string) answerOf {
	t.Helper()
	return e.do(t, "POST", "/vouchers/"+code+"/reservations", `{"customerId":"c-`+order+`","orderId":"`+order+`","orderAmount":1000}`)
}

func soldOutState(code string, holders ...string) events.VoucherState {
	return events.VoucherState{Code: code, SoldOut: true, At: time.Now().UTC(), Holders: events.NewHolderFilter(holders)}
}

// errorCode decodes a JSON error answer, failing the test if it is not one.
func errorCode(t testing.TB, a answerOf) string {
	t.Helper()
	var e wire.Error
	if err := json.Unmarshal([]byte(a.body), &e); err != nil || e.Error == "" {
		t.Fatalf("answer %d %q is not a JSON error", a.status, a.body)
	}
	if ct := string(a.header.ContentType()); ct != "application/json" {
		t.Fatalf("error answer has Content-Type %q", ct)
	}
	return e.Error
}

// rawClient is a connection written raw and read line by line.
type rawClient struct {
	net.Conn
	r *bufio.Reader
}

func dialRawProxy(t *testing.T, addr string) *rawClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawClient{Conn: c, r: bufio.NewReader(c)}
}

// drainAnswer reads the rest of an answer whose status line was read: its header and body.
func drainAnswer(t *testing.T, c *rawClient) {
	t.Helper()
	length := -1
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			fmt.Sscan(strings.TrimSpace(v), &length)
		}
	}
	if length > 0 {
		if _, err := io.ReadFull(c.r, make([]byte, length)); err != nil {
			t.Fatal(err)
		}
	}
}
