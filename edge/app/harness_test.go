package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/backendtest"
	"vouchergate/edge/app"
	"vouchergate/shared/config"
	"vouchergate/testkit"
)

func TestMain(m *testing.M) {
	testkit.RunCheckoutStandInIfAsked() // when started as the checkout API of a pass-through test
	code := m.Run()
	backendtest.RemoveBinary() // the backend and edge commands the tests ran as processes
	os.Exit(code)
}

// edgeConfig returns settings for a test edge in front of backends.
func edgeConfig(natsURL, natsPrefix string, backends ...string) config.Edge {
	return config.Edge{
		Addr: "127.0.0.1:0", Backends: backends, NATSURL: natsURL, NATSPrefix: natsPrefix, NATSReplicas: 1,
		ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second,
		MaxHeaderBytes: 8192, MaxBodyBytes: 1 << 20, MaxAPIBodyBytes: 8192, MaxRespBytes: 4 << 20,
		ShutdownGrace:  2 * time.Second,
		BackendTimeout: 3 * time.Second, UpstreamTimeout: 3 * time.Second, DialTimeout: 300 * time.Millisecond,
		ConnWait: 200 * time.Millisecond, MaxConns: 256, ReserveWait: time.Second,
		HealthEvery: 100 * time.Millisecond, HealthTimeout: 300 * time.Millisecond, HealthFalls: 2,
		SoldOutTTL: 5 * time.Second, SoldOutRefresh: 2 * time.Second, StateEvery: 100 * time.Millisecond,
		SyncWait:          2 * time.Second,
		UpstreamKeepAlive: 2 * time.Second, UpstreamReadTimeout: 3 * time.Second, UpstreamMaxHeaderBytes: 64 << 10, UpstreamProbePath: "/",
		StreamSendTimeout: 5 * time.Second,
	}
}

// edge is a running test edge, with its ops listener, and a client for it.
type edge struct {
	App    *app.App
	Addr   string
	Ops    string // the ops listener: /readyz in full, /metrics
	client *fasthttp.HostClient
	ops    *fasthttp.HostClient
}

// startEdge runs an edge with cfg until the test ends; its log is discarded unless opts give
// one (app.WithLog).
func startEdge(t *testing.T, cfg config.Edge, opts ...app.Option) *edge {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := app.New(ctx, cfg, append([]app.Option{app.WithLog(testkit.QuietLog)}, opts...)...)
	if err != nil {
		t.Fatalf("start edge: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opsLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go a.Serve(ln)       //nolint:errcheck
	go a.ServeOps(opsLn) //nolint:errcheck
	t.Cleanup(func() { _ = a.Close() })
	return &edge{App: a, Addr: ln.Addr().String(), Ops: opsLn.Addr().String(), client: &fasthttp.HostClient{
		Addr: ln.Addr().String(), MaxConns: 256, ReadTimeout: 15 * time.Second, WriteTimeout: 15 * time.Second,
	}, ops: &fasthttp.HostClient{Addr: opsLn.Addr().String(), ReadTimeout: 15 * time.Second, WriteTimeout: 15 * time.Second}}
}

type answer struct {
	Status int
	Body   string
}

func (e *edge) do(t testing.TB, method, path, body string) answer {
	t.Helper()
	return e.doWith(t, e.client, method, path, body)
}

// doOps asks the ops listener.
func (e *edge) doOps(t testing.TB, method, path string) answer {
	t.Helper()
	return e.doWith(t, e.ops, method, path, "")
}

func (e *edge) doWith(t testing.TB, client *fasthttp.HostClient, method, path, body string) answer {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("http://" + client.Addr + path)
	if body != "" {
		req.SetBodyString(body)
		req.Header.SetContentType("application/json")
	}
	if err := client.DoTimeout(req, resp, 15*time.Second); err != nil {
		t.Errorf("%s %s through the edge: %v", method, path, err)
		return answer{}
	}
	return answer{Status: resp.StatusCode(), Body: string(resp.Body())}
}

func (e *edge) reserve(t testing.TB, code, customer, order string) answer {
	return e.do(t, "POST", "/vouchers/"+code+"/reservations",
		fmt.Sprintf(`{"customerId":%q,"orderId":%q,"orderAmount":100000}`, customer, order))
}

// knows reports whether the edge answers code as sold out. A lookup that falls due for a
// refresh asks for it, as the proxy's would: the test's looking must not use up the one
// refresh an entry asks for.
func (e *edge) knows(code string) bool {
	en, refresh := e.App.Cache.Lookup([]byte(code), time.Now())
	if refresh {
		e.App.Refresher.Ask(code)
	}
	return en != nil
}

// front passes requests to a backend and counts them, so a test can tell what reached it.
type front struct {
	Addr     string
	reserves atomic.Int64 // POST .../reservations
	others   atomic.Int64 // anything but /healthz
}

func startFront(t *testing.T, backendAddr string) *front {
	t.Helper()
	f := &front{}
	hc := &fasthttp.HostClient{Addr: backendAddr, MaxConns: 512, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.Addr = ln.Addr().String()
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		path := string(ctx.Path())
		switch {
		case path == "/healthz":
		case ctx.IsPost() && strings.HasSuffix(path, "/reservations"):
			f.reserves.Add(1)
		default:
			f.others.Add(1)
		}
		var req fasthttp.Request
		ctx.Request.CopyTo(&req)
		if err := hc.DoTimeout(&req, &ctx.Response, 10*time.Second); err != nil {
			ctx.Response.Reset()
			ctx.SetStatusCode(502)
		}
	}}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { _ = srv.Shutdown() })
	return f
}

// hammer sends n reservations of new orders through e from workers goroutines and returns the
// count of answers by status.
func hammer(t *testing.T, e *edge, code string, n, workers int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[int]int{}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := map[int]int{}
			for {
				i := next.Add(1)
				if i > int64(n) {
					break
				}
				a := e.reserve(t, code, fmt.Sprintf("late-cust-%d-%d", w, i), fmt.Sprintf("late-order-%d", i))
				local[a.Status]++
			}
			mu.Lock()
			for s, c := range local {
				counts[s] += c
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return counts
}

func discountOf(t *testing.T, body string) int64 {
	t.Helper()
	var r struct {
		DiscountAmount int64 `json:"discountAmount"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("201 body %q: %v", body, err)
	}
	return r.DiscountAmount
}

// metrics returns the edge's sold-out counters, for logs.
func metrics(t *testing.T, e *edge) string {
	a := e.doOps(t, "GET", "/metrics")
	var out []string
	for _, line := range strings.Split(a.Body, "\n") {
		if strings.HasPrefix(line, "vg_edge_") && !strings.HasPrefix(line, "vg_edge_requests_total") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
