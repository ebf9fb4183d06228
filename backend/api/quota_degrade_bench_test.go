package api_test

import (
	"encoding/json"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// BenchmarkDegradedDeductsRedisHung is BenchmarkDegradedDeductsRedisStopped with Redis hanging
// instead: the backend reaches it through a proxy that, once told, accepts connections and
// holds them without an answer, so every call that tries Redis waits for VG_REDIS_TIMEOUT
// (300ms). Only the breaker's backoff keeps the OPEN line's degraded answers quick.
func BenchmarkDegradedDeductsRedisHung(b *testing.B) {
	srv := testkit.StartRedis(b)
	hang := startHangingProxy(b, srv.Addr())
	benchDegraded(b, "redis://"+hang.addr+"/0", hang.hang)
}

// BenchmarkDegradedDeductsRedisStopped stops a redis-server it started, then sends deducts
// over HTTP from benchClients connections to a backend on the wall clock (its breaker's
// backoff, VG_QUOTA_DEGRADE_BACKOFF 1s, runs in real time, so a deduct tries the stopped Redis
// again every second): for a business line set to whenUnavailable OPEN every answer must be a
// degraded 200, for a CLOSED one a 503. It reports the latency percentiles of those answers.
// Run it with -benchtime 1x.
func BenchmarkDegradedDeductsRedisStopped(b *testing.B) {
	srv := testkit.StartRedis(b)
	benchDegraded(b, srv.URL(), srv.Stop)
}

func benchDegraded(b *testing.B, redisURL string, down func()) {
	cfg := backendtest.Config(b)
	cfg.RedisURL = redisURL
	cfg.RedisTimeout = 300 * time.Millisecond // the backend's default
	back := backendtest.Start(b, cfg)
	handler := back.App.API.Handle
	for _, r := range append(strings.Split(benchRules, "\n"),
		`{"bizId":2,"identityType":"USER","dimension":"ITEM:1001","limit":1000000000000000,"window":{"type":"DAY","timezone":"Asia/Shanghai"}}`) {
		if c := call(handler, "POST", "/admin/quota-rules", r); c.Response.StatusCode() != 201 {
			b.Fatalf("rule: %s", c.Response.Body())
		}
	}
	if c := call(handler, "POST", "/admin/quota-settings", `{"bizId":1,"whenUnavailable":"OPEN"}`); c.Response.StatusCode() != 200 {
		b.Fatalf("setting: %s", c.Response.Body())
	}
	if c := call(handler, "POST", "/quotas/deduct", string(deductBody("warm", 0))); c.Response.StatusCode() != 200 {
		b.Fatalf("warm-up: %s", c.Response.Body())
	}
	down()
	for _, tc := range []struct {
		name   string
		biz    string
		status int
		n      int // a CLOSED line's deducts may each wait VG_REDIS_TIMEOUT: fewer of them
	}{{"open", "1", 200, 20000}, {"closed", "2", 503, 2000}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				lat := degradedRun(b, handler, tc.biz, tc.status, tc.n)
				slices.Sort(lat)
				at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
				b.ReportMetric(at(0.5), "p50-ms")
				b.ReportMetric(at(0.99), "p99-ms")
				b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
			}
		})
	}
}

// degradedRun sends n deducts of bizId biz and returns each one's latency, failing on an answer
// that is not status (for a 200: not degraded).
func degradedRun(b *testing.B, handler fasthttp.RequestHandler, biz string, status, n int) []time.Duration {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: handler, Concurrency: 4 * benchClients}
	go srv.Serve(ln)     //nolint:errcheck // ends with Shutdown
	defer srv.Shutdown() //nolint:errcheck
	c := &fasthttp.HostClient{Addr: ln.Addr().String(), MaxConns: benchClients}
	lat := make([]time.Duration, n)
	var seq atomic.Int64
	var wg sync.WaitGroup
	for range benchClients {
		wg.Go(func() {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI("http://" + c.Addr + "/quotas/deduct")
			req.Header.SetMethod("POST")
			for {
				i := int(seq.Add(1))
				if i > n {
					return
				}
				body := strings.Replace(string(deductBody("u", int64(i))), `"bizId":1`, `"bizId":`+biz, 1)
				req.SetBodyString(body)
				t := time.Now()
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != status {
					b.Errorf("deduct of bizId %s with Redis stopped: %v %d %s; want %d", biz, err, resp.StatusCode(), resp.Body(), status)
					return
				}
				lat[i-1] = time.Since(t)
				if status == 200 {
					var out wire.QuotaDeductResponse
					if json.Unmarshal(resp.Body(), &out) != nil || !out.Degraded || len(out.Counters) != 0 {
						b.Errorf("an OPEN business line's answer with Redis stopped: %s; want degraded, nothing counted", resp.Body())
						return
					}
				}
			}
		})
	}
	wg.Wait()
	return lat
}

// hangingProxy forwards TCP to a Redis until hang is called; from then on it closes what it
// forwarded and holds every new connection open without a byte, as a Redis behind a dead
// network path would.
type hangingProxy struct {
	addr    string
	hanging atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

func startHangingProxy(b *testing.B, target string) *hangingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	p := &hangingProxy{addr: ln.Addr().String()}
	b.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			if p.hanging.Load() {
				continue // held open, never answered
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

// hang cuts the connections forwarded so far and holds every new one.
func (p *hangingProxy) hang() {
	p.hanging.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
