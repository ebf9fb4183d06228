package api_test

import (
	"context"
	"net"
	osexec "os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"vouchergate/backend/backendtest"
	"vouchergate/backend/quota"
	"vouchergate/loadtest/load"
	"vouchergate/lua"
	"vouchergate/testkit"
)

// benchClients is how many requests are in flight at once.
const benchClients = 64

// benchRules never refuse: "3 a day, 10 a week" of the item and "30 a month of each item"
// (ITEM:*, a wildcard rule, so each deduct also notes its counter in the identity's index, as a
// platform's rules do) with limits too high to reach.
const benchRules = `{"bizId":1,"identityType":"USER","dimension":"ITEM:1001","limit":1000000000000000,"window":{"type":"DAY","timezone":"Asia/Shanghai"}}
{"bizId":1,"identityType":"USER","dimension":"ITEM:1001","limit":1000000000000000,"window":{"type":"WEEK","timezone":"Asia/Shanghai"}}
{"bizId":1,"identityType":"USER","dimension":"ITEM:*","limit":1000000000000000,"window":{"type":"MONTH","timezone":"Asia/Shanghai"}}`

// benchStack serves the API over a Redis of its own, so that its INFO counts only this
// benchmark's work and the shared one is left alone. It returns the backend, its API's handler
// and the Redis address.
func benchStack(b *testing.B) (*backendtest.Backend, fasthttp.RequestHandler, string) {
	srv := testkit.StartRedis(b)
	cfg := backendtest.Config(b)
	cfg.RedisURL = "redis://" + srv.Addr()
	back, _ := startQuotas(b, t0, &cfg)
	handler := back.App.API.Handle
	for _, r := range strings.Split(benchRules, "\n") {
		if c := call(handler, "POST", "/admin/quota-rules", r); c.Response.StatusCode() != 201 {
			b.Fatalf("rule: %s", c.Response.Body())
		}
	}
	return back, handler, srv.Addr()
}

func deductBody(id string, i int64) []byte {
	b := make([]byte, 0, 160)
	b = append(b, `{"bizId":1,"idemKey":"k`...)
	b = strconv.AppendInt(b, i, 10)
	b = append(b, `","items":[{"identityType":"USER","identity":"`...)
	b = append(b, id...)
	b = append(b, `","dimensions":["ITEM:1001"],"amount":1}]}`...)
	return b
}

// BenchmarkDeductHandler calls the handler in memory: decode, service, Redis, encode; no network
// between client and handler.
func BenchmarkDeductHandler(b *testing.B) {
	_, handler, _ := benchStack(b)
	runDeductHandler(b, handler, new(atomic.Int64))
}

// httpResult is one HTTP load run.
type httpResult struct {
	rate     float64 // 200 answers per second
	p99      float64 // ms
	redisCPU float64 // µs of Redis CPU per deduct
	procCPU  float64 // µs of this process's CPU per deduct: server and load client together
}

// httpRate sends n deducts over real TCP to a fasthttp server on 127.0.0.1 from benchClients
// connections.
func httpRate(b *testing.B, handler fasthttp.RequestHandler, redisAddr string, n int64, many bool) httpResult {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: handler, Concurrency: 4 * benchClients}
	go srv.Serve(ln)     //nolint:errcheck // ends with Shutdown
	defer srv.Shutdown() //nolint:errcheck
	c := &fasthttp.HostClient{Addr: ln.Addr().String(), MaxConns: benchClients}
	run := time.Now().UnixNano()
	var seq atomic.Int64
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	redis0, proc0 := redisCPU(b, redisAddr), procCPU()
	start := time.Now()
	for range benchClients {
		wg.Go(func() {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI("http://" + c.Addr + "/quotas/deduct")
			req.Header.SetMethod("POST")
			for {
				i := seq.Add(1)
				if i > n {
					return
				}
				id := "bench"
				if many {
					id = "u" + strconv.FormatInt(i%100000, 10)
				}
				req.SetBody(deductBody(id, run+i))
				t := time.Now()
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
					b.Errorf("deduct: %v %d %s", err, resp.StatusCode(), resp.Body())
					return
				}
				lat[i-1] = time.Since(t)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	return httpResult{
		rate:     float64(n) / elapsed.Seconds(),
		p99:      float64(lat[len(lat)*99/100]) / float64(time.Millisecond),
		redisCPU: (redisCPU(b, redisAddr) - redis0) * 1e6 / float64(n),
		procCPU:  (procCPU() - proc0) * 1e6 / float64(n),
	}
}

// redisCPU returns the CPU seconds so far of the Redis at addr (INFO cpu).
func redisCPU(b *testing.B, addr string) float64 {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	used, err := testkit.RedisCPU(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	return used.Seconds()
}

// procCPU returns this process's CPU seconds so far.
func procCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// report adds the medians of rs to b's metrics.
func report(b *testing.B, rs []httpResult) {
	pick := func(f func(httpResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return load.Median(v)
	}
	b.ReportMetric(pick(func(r httpResult) float64 { return r.rate }), "deducts/s")
	b.ReportMetric(pick(func(r httpResult) float64 { return r.p99 }), "p99-ms")
	b.ReportMetric(pick(func(r httpResult) float64 { return r.redisCPU }), "redis-µs/op")
	b.ReportMetric(pick(func(r httpResult) float64 { return r.procCPU }), "proc-µs/op")
}

// BenchmarkHTTPDeduct measures allowed deducts per second over HTTP on one machine (client,
// fasthttp server, service and Redis share its cores): the median of benchRounds rounds. Run
// it with -benchtime 1x.
func BenchmarkHTTPDeduct(b *testing.B) {
	_, handler, addr := benchStack(b)
	// the same load against a handler that answers a fixed 200 at once: what the load client
	// and bare fasthttp cost, to subtract from proc-µs/op
	b.Run("fixed-answer", func(b *testing.B) {
		fixed := func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(200); ctx.SetBodyString(`{}`) }
		for range b.N {
			var rs []httpResult
			for range benchRounds {
				rs = append(rs, httpRate(b, fixed, addr, 20000, false))
			}
			report(b, rs)
		}
	})
	for _, many := range []bool{false, true} {
		name := "one-identity"
		if many {
			name = "many-identities"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				var rs []httpResult
				for range benchRounds {
					rs = append(rs, httpRate(b, handler, addr, 20000, many))
				}
				report(b, rs)
			}
		})
	}
}

// BenchmarkHTTPVersusRedisBenchmark runs, in the same run on the same Redis, redis-benchmark
// sending the deduct script's EVALSHA for one identity, then as many deducts over HTTP, and
// reports the medians of both rates and of their ratio over benchRounds rounds. Run it with
// -benchtime 1x.
func BenchmarkHTTPVersusRedisBenchmark(b *testing.B) {
	if _, err := osexec.LookPath("redis-benchmark"); err != nil {
		b.Skip("redis-benchmark is not installed")
	}
	back, handler, addr := benchStack(b)
	keys, args, err := back.App.Quotas.DeductScriptCall(1, "rb-__rand_int__", []quota.Item{{IdentityType: "USER", Identity: "bench", Dimensions: []string{"ITEM:1001"}, Amount: 1}})
	if err != nil {
		b.Fatal(err)
	}
	cmd := testkit.EvalSHA(lua.QuotaDeduct, keys, args)
	if c := call(handler, "POST", "/quotas/deduct", string(deductBody("bench", 0))); c.Response.StatusCode() != 200 {
		b.Fatalf("warm-up: %s", c.Response.Body()) // also loads the scripts
	}
	const n = 50000
	for range b.N {
		var theirs, ratios []float64
		var ours []httpResult
		for range benchRounds {
			t := testkit.RedisBenchmark(b, addr, benchClients, n, cmd)
			o := httpRate(b, handler, addr, n, false)
			theirs, ours, ratios = append(theirs, t), append(ours, o), append(ratios, o.rate/t)
		}
		b.ReportMetric(load.Median(theirs), "redis-benchmark/s")
		report(b, ours)
		b.ReportMetric(load.Median(ratios), "ratio")
	}
}

// benchRounds is how many times a comparison alternates the two sides; it reports medians.
const benchRounds = 5
