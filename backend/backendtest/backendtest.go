// Package backendtest boots a real backend for tests, isolated on the shared PostgreSQL, Redis
// and NATS (its own database, key prefix and subject prefix), in the test's process or as the
// backend command the test can SIGKILL (process.go), and checks the invariants of DESIGN.md by
// reading both stores (invariants.go, gate.go).
package backendtest

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/valyala/fasthttp"

	"vouchergate/backend/apikeys"
	"vouchergate/backend/app"
	"vouchergate/backend/backendtest/history"
	"vouchergate/shared/config"
	"vouchergate/shared/events"
	"vouchergate/testkit"
)

// Token is the admin token of every test backend.
const Token = "test-admin-token"

// Backend is a running test backend.
type Backend struct {
	URL    string // http://127.0.0.1:port
	Addr   string
	OpsURL string // the ops listener's http://127.0.0.1:port: /metrics, /healthz, /readyz
	App    *app.App
	Config config.Backend
	client *fasthttp.Client
	rec    *history.Recorder // Record's; nil: nothing recorded
}

// Config returns settings isolated for one test: a fresh database, key prefix and subject
// prefix on the shared servers. Its time bounds are generous: tests run with -race on a
// small, shared machine and check correctness, not speed; fault tests shorten what they need.
func Config(t testing.TB) config.Backend {
	return config.Backend{
		DatabaseURL:    testkit.Database(t),
		RedisURL:       testkit.RedisURL,
		RedisPrefix:    testkit.RedisPrefix(t),
		RedisTimeout:   time.Second,
		NATSURL:        testkit.NATSURL,
		NATSPrefix:     testkit.NATSPrefix(),
		NATSReplicas:   1,
		AdminToken:     Token,
		HoldTTL:        15 * time.Minute,
		RequestTimeout: 30 * time.Second,
		DBTimeout:      10 * time.Second,
		// Packages run two at a time, some with two backends each, against one PostgreSQL of
		// 100 connections: 32 each could take them all ("too many clients already").
		DBMaxConns:     10,
		DBWarmConns:    2, // warmed as at a real start, few: they stay open
		InFlightWait:   10 * time.Second,
		MaxBodyBytes:   8192,
		MaxHeaderBytes: 8192,
		SoldOutEvery:   250 * time.Millisecond,
		// jobs are off (zero intervals); tests run them through the admin API or App.Jobs
		ReconcileGrace: 30 * time.Second,
		WarmupAhead:    10 * time.Minute,
		// the defaults, which Check requires to be set
		QuotaIdemTTL:      168 * time.Hour,
		QuotaRefreshEvery: 10 * time.Second,
		ShutdownGrace:     10 * time.Second,
		APIKeysPoll:       apikeys.PollEvery, // a changed keys file is taken without a SIGHUP
	}
}

// Start runs a backend with cfg on a free port until the test ends. It fails the test if
// cfg does not pass config.Check, as the backend command would refuse it.
func Start(t testing.TB, cfg config.Backend, opts ...app.Option) *Backend {
	t.Helper()
	if err := cfg.Check(); err != nil {
		t.Fatalf("backend settings the command would refuse: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := app.New(ctx, cfg, opts...)
	if err != nil {
		t.Fatalf("start backend: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	go a.Serve(ln)
	ops, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	go a.ServeOps(ops)
	t.Cleanup(func() {
		a.Close()
		deleteBucket(cfg)
	})
	return &Backend{
		URL: "http://" + ln.Addr().String(), Addr: ln.Addr().String(), OpsURL: "http://" + ops.Addr().String(), App: a, Config: cfg,
		client: &fasthttp.Client{MaxConnsPerHost: 512, MaxConnWaitTimeout: 20 * time.Second,
			ReadTimeout: 60 * time.Second, WriteTimeout: 60 * time.Second},
	}
}

// Do sends a request with a JSON body (nil for none) and returns the status and body.
// Admin paths get the bearer token. Safe for concurrent use.
func (b *Backend) Do(t testing.TB, method, path string, body any) (int, []byte) {
	return b.do(t, method, path, body, nil, nil)
}

// DoWithHeader sends a request without a body, with one header set as given (replacing the
// admin token on admin paths).
func (b *Backend) DoWithHeader(t testing.TB, method, path, name, value string) (int, []byte) {
	return b.do(t, method, path, nil, func(req *fasthttp.Request) { req.Header.Set(name, value) }, nil)
}

// DoWithHeaders sends a request with a JSON body (nil for none) and the headers given, set last
// (an Authorization among them replaces the admin token), and returns the status, the body and
// the answer's headers.
func (b *Backend) DoWithHeaders(t testing.TB, method, path string, body any, headers map[string]string) (int, []byte, *fasthttp.ResponseHeader) {
	var h fasthttp.ResponseHeader
	status, got := b.do(t, method, path, body, func(req *fasthttp.Request) {
		for name, value := range headers {
			req.Header.Set(name, value)
		}
	}, &h)
	return status, got, &h
}

func (b *Backend) do(t testing.TB, method, path string, body any, edit func(*fasthttp.Request), hdr *fasthttp.ResponseHeader) (int, []byte) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(b.URL + path)
	if len(path) > 7 && path[:7] == "/admin/" {
		req.Header.Set("Authorization", "Bearer "+Token)
	}
	switch body := body.(type) {
	case nil:
	case string:
		req.SetBodyString(body)
	case []byte:
		req.SetBody(body)
	default:
		raw, err := json.Marshal(body)
		if err != nil {
			t.Errorf("encode body: %v", err)
			return 0, nil
		}
		req.SetBody(raw)
	}
	req.Header.SetContentType("application/json")
	if edit != nil {
		edit(req)
	}
	call := b.recordBegin(req)
	if err := b.client.DoTimeout(req, resp, 60*time.Second); err != nil {
		recordEnd(call, 0, nil, err)
		t.Errorf("%s %s: %v", method, path, err)
		return 0, nil
	}
	recordEnd(call, resp.StatusCode(), resp.Body(), nil)
	if hdr != nil {
		resp.Header.CopyTo(hdr)
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...)
}

// Voucher is a voucher to create; zero fields take test defaults.
type Voucher struct {
	Code           string
	Discount       int64
	MinOrderAmount int64
	TotalLimit     int
	PerUserLimit   int
	StartsAt       time.Time
	EndsAt         time.Time
	FlashSale      bool
}

// CreateVoucher creates v through the admin API (open from a minute ago for a day unless
// set) and fails the test unless it answers 201.
func (b *Backend) CreateVoucher(t testing.TB, v Voucher) {
	t.Helper()
	if v.StartsAt.IsZero() {
		v.StartsAt = time.Now().Add(-time.Minute)
	}
	if v.EndsAt.IsZero() {
		v.EndsAt = v.StartsAt.Add(24 * time.Hour)
	}
	if v.PerUserLimit == 0 {
		v.PerUserLimit = 1
	}
	status, body := b.Do(t, "POST", "/admin/vouchers", map[string]any{
		"code": v.Code, "discountAmount": v.Discount, "minOrderAmount": v.MinOrderAmount,
		"totalLimit": v.TotalLimit, "perUserLimit": v.PerUserLimit,
		"startsAt": v.StartsAt, "endsAt": v.EndsAt, "flashSale": v.FlashSale,
	})
	if status != 201 {
		t.Fatalf("create voucher %s: %d %s", v.Code, status, body)
	}
}

// Reserve asks for a reservation and returns the status and decoded error code or discount.
func (b *Backend) Reserve(t testing.TB, code, customer, order string, amount int64) (int, []byte) {
	return b.Do(t, "POST", "/vouchers/"+code+"/reservations",
		map[string]any{"customerId": customer, "orderId": order, "orderAmount": amount})
}

// deleteBucket removes the test's sold-out bucket from the shared NATS server.
func deleteBucket(cfg config.Backend) {
	nc, err := nats.Connect(cfg.NATSURL, nats.Timeout(time.Second))
	if err != nil {
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = js.DeleteKeyValue(ctx, events.Names{Prefix: cfg.NATSPrefix}.StateBucket())
}
