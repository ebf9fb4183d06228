package upstream

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/events"
	"vouchergate/testkit"
)

// server is a real fasthttp server on 127.0.0.1 that can be stopped and started again on the
// same address.
type server struct {
	t       *testing.T
	addr    string
	handler fasthttp.RequestHandler
	srv     *fasthttp.Server
	hits    atomic.Int32
	healthy atomic.Bool
}

func startServer(t *testing.T, h fasthttp.RequestHandler) *server {
	t.Helper()
	s := &server{t: t, handler: h}
	s.healthy.Store(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	t.Cleanup(s.stop)
	return s
}

func (s *server) serve(ln net.Listener) {
	s.srv = &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/healthz" {
			if !s.healthy.Load() {
				ctx.SetStatusCode(503)
			}
			return
		}
		s.hits.Add(1)
		s.handler(ctx)
	}}
	go s.srv.Serve(ln) //nolint:errcheck
}

func (s *server) stop() {
	if s.srv != nil {
		_ = s.srv.Shutdown()
		s.srv = nil
	}
}

func (s *server) restart() {
	s.t.Helper()
	s.serve(testkit.ListenAgain(s.t, s.addr))
}

func ok(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(200); ctx.SetBodyString("ok") }

func testPoolOptions() PoolOptions {
	return PoolOptions{
		Client:        Options{DialTimeout: 200 * time.Millisecond, ConnWait: 50 * time.Millisecond, MaxConns: 16, MaxHeaderBytes: 8192, MaxBodyBytes: 1 << 20, IdleTimeout: time.Second},
		HealthEvery:   50 * time.Millisecond,
		HealthTimeout: 200 * time.Millisecond,
		HealthFalls:   2,
	}
}

func newPool(t *testing.T, servers ...*server) *Pool {
	t.Helper()
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.addr
	}
	p := NewPool(addrs, make([]bool, len(addrs)), testPoolOptions(), testkit.QuietLog)
	t.Cleanup(p.Close)
	return p
}

func get(p *Pool, path string) (int, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(path)
	req.Header.SetHost("edge.test")
	req.Header.SetMethod("POST")
	err := p.Do(req, resp, time.Now().Add(time.Second))
	return resp.StatusCode(), err
}

func TestPoolSpreadsCalls(t *testing.T) {
	a, b := startServer(t, ok), startServer(t, ok)
	p := newPool(t, a, b)
	for range 100 {
		if status, err := get(p, "/x"); err != nil || status != 200 {
			t.Fatalf("call = %d, %v", status, err)
		}
	}
	if a.hits.Load() < 20 || b.hits.Load() < 20 {
		t.Fatalf("calls split %d/%d; want both backends used", a.hits.Load(), b.hits.Load())
	}
}

func TestPoolSurvivesAKilledBackendAndTakesItBack(t *testing.T) {
	a, b := startServer(t, ok), startServer(t, ok)
	p := newPool(t, a, b)
	a.stop()
	for range 50 { // no call may fail: a refused connection goes to the other backend
		if status, err := get(p, "/x"); err != nil || status != 200 {
			t.Fatalf("with one backend killed, call = %d, %v", status, err)
		}
	}
	if p.Healthy() != 1 {
		t.Fatalf("Healthy = %d with one backend killed; want 1", p.Healthy())
	}
	a.restart()
	testkit.Eventually(t, "killed backend back in service", func() bool { return p.Healthy() == 2 })
	before := a.hits.Load()
	for range 50 {
		_, _ = get(p, "/x")
	}
	if a.hits.Load() == before {
		t.Fatal("restarted backend gets no calls")
	}
}

func TestPoolWithNoBackendFailsFast(t *testing.T) {
	a := startServer(t, ok)
	p := newPool(t, a)
	a.stop()
	testkit.Eventually(t, "backend out", func() bool { _, _ = get(p, "/x"); return p.Healthy() == 0 })
	if _, err := get(p, "/x"); !errors.Is(err, ErrNoBackend) {
		t.Fatalf("err = %v; want ErrNoBackend", err)
	}
}

func TestFailingHealthCheckTakesBackendOut(t *testing.T) {
	a, b := startServer(t, ok), startServer(t, ok)
	p := newPool(t, a, b)
	a.healthy.Store(false)
	testkit.Eventually(t, "unhealthy backend out", func() bool { return p.Healthy() == 1 })
	before := a.hits.Load()
	for range 20 {
		_, _ = get(p, "/x")
	}
	if a.hits.Load() != before {
		t.Fatal("backend failing its health check still gets calls")
	}
	a.healthy.Store(true)
	testkit.Eventually(t, "backend back", func() bool { return p.Healthy() == 2 })
}

func TestSlowBackendTimesOut(t *testing.T) {
	release := make(chan struct{})
	slow := startServer(t, func(ctx *fasthttp.RequestCtx) { <-release })
	defer close(release)
	p := newPool(t, slow)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	req.SetRequestURI("/slow")
	req.Header.SetHost("edge.test")
	done := make(chan error, 1)
	go func() { done <- p.Do(req, resp, time.Now().Add(100*time.Millisecond)) }()
	select {
	case err := <-done:
		if !TimedOut(err) {
			t.Fatalf("err = %v; want a timeout", err)
		}
	case <-time.After(testkit.WaitBound):
		t.Fatal("call to a hung backend did not return")
	}
}

func TestVoucherState(t *testing.T) {
	state := events.VoucherState{Code: "FLASH", SoldOut: true, At: time.Now().UTC(), Holders: events.NewHolderFilter([]string{"o-1"})}
	payload, _ := state.Encode()
	s := startServer(t, func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case "/vouchers/FLASH/state":
			ctx.SetBody(payload)
		case "/vouchers/BROKEN/state":
			ctx.SetBodyString(`{"code":"BROKEN","soldOut":true}`)
		default:
			ctx.SetStatusCode(404)
		}
	})
	p := newPool(t, s)
	got, err := p.VoucherState(context.Background(), "FLASH")
	if err != nil || !got.SoldOut || got.Code != "FLASH" || !got.Holders.MayHold([]byte("o-1")) {
		t.Fatalf("VoucherState = %+v, %v", got, err)
	}
	if _, err := p.VoucherState(context.Background(), "BROKEN"); err == nil {
		t.Fatal("sold out without holders accepted")
	}
	if _, err := p.VoucherState(context.Background(), "NONE"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("err = %v; want one naming the 404", err)
	}
}

// A backend that went away and came back is called on new connections: the kept-alive ones
// from before it went are closed when it is taken out and when it is put back, so the first
// reservation after a restart (a POST, which is not retried) does not meet a dead connection.
func TestARestartedBackendIsCalledOnNewConnections(t *testing.T) {
	a := startServer(t, ok)
	p := newPool(t, a)
	for range 4 { // connections kept alive
		if status, err := get(p, "/x"); err != nil || status != 200 {
			t.Fatalf("call = %d, %v", status, err)
		}
	}
	a.stop()
	testkit.Eventually(t, "the stopped backend out of service", func() bool { return p.Healthy() == 0 })
	a.restart()
	testkit.Eventually(t, "the restarted backend in service", func() bool { return p.Healthy() == 1 })
	for i := range 4 {
		if status, err := get(p, "/x"); err != nil || status != 200 {
			t.Fatalf("call %d after the restart = %d, %v; want 200 on a new connection", i, status, err)
		}
	}
}
