package quotaapi_test

import (
	"encoding/csv"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/quota"
	"vouchergate/lua"
	"vouchergate/testkit"
)

// benchClients is how many requests are in flight at once.
const benchClients = 64

// benchRules never refuse: "3 a day, 10 a week" with limits too high to reach.
const benchRules = `{"bizId":1,"identityType":"USER","dimension":"ITEM:1001","limit":1000000000000000,"window":{"type":"DAY","timezone":"Asia/Shanghai"}}
{"bizId":1,"identityType":"USER","dimension":"ITEM:1001","limit":1000000000000000,"window":{"type":"WEEK","timezone":"Asia/Shanghai"}}`

func benchStack(b *testing.B) (*quota.Service, fasthttp.RequestHandler) {
	h, _, svc := newStack(b, t0)
	handler := route(h)
	for _, r := range strings.Split(benchRules, "\n") {
		if c := call(handler, "POST", "/admin/quota-rules", r); c.Response.StatusCode() != 201 {
			b.Fatalf("rule: %s", c.Response.Body())
		}
	}
	return svc, handler
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
	_, handler := benchStack(b)
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(benchClients / 2)
	b.RunParallel(func(pb *testing.PB) {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI("/quotas/deduct")
		for pb.Next() {
			ctx.Request.SetBody(deductBody("bench", seq.Add(1)))
			ctx.Response.Reset()
			handler(&ctx)
			if ctx.Response.StatusCode() != 200 {
				b.Errorf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deducts/s")
}

// httpRate sends n deducts over real TCP to a fasthttp server on 127.0.0.1 from benchClients
// connections, and returns the rate of 200 answers.
func httpRate(b *testing.B, handler fasthttp.RequestHandler, n int64, many bool) float64 {
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
	var wg sync.WaitGroup
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
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
					b.Errorf("deduct: %v %d %s", err, resp.StatusCode(), resp.Body())
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// BenchmarkHTTPDeduct measures allowed deducts per second over HTTP on one machine: client,
// fasthttp server, service and Redis share its cores.
func BenchmarkHTTPDeduct(b *testing.B) {
	_, handler := benchStack(b)
	for _, many := range []bool{false, true} {
		name := "one-identity"
		if many {
			name = "many-identities"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				b.ReportMetric(httpRate(b, handler, 50000, many), "deducts/s")
			}
		})
	}
}

// BenchmarkHTTPVersusRedisBenchmark runs, in the same run on the same Redis, redis-benchmark
// sending the deduct script's EVALSHA for one identity, then as many deducts over HTTP, and
// reports both rates and their ratio. Run it with -benchtime 1x -count 5 and take medians.
func BenchmarkHTTPVersusRedisBenchmark(b *testing.B) {
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		b.Skip("redis-benchmark is not installed")
	}
	svc, handler := benchStack(b)
	cmd, err := svc.DeductCommand(1, "rb-__rand_int__", []quota.Item{{IdentityType: "USER", Identity: "bench", Dimensions: []string{"ITEM:1001"}, Amount: 1}})
	if err != nil {
		b.Fatal(err)
	}
	if c := call(handler, "POST", "/quotas/deduct", string(deductBody("bench", 0))); c.Response.StatusCode() != 200 {
		b.Fatalf("warm-up: %s", c.Response.Body()) // also loads the scripts
	}
	_ = lua.QuotaDeduct
	const n = 100000
	for range b.N {
		theirs := redisBenchmark(b, cmd, n)
		ours := httpRate(b, handler, n, false)
		b.ReportMetric(theirs, "redis-benchmark/s")
		b.ReportMetric(ours, "deducts/s")
		b.ReportMetric(ours/theirs, "ratio")
	}
}

// redisBenchmark runs redis-benchmark -c benchClients -n n on cmd against the shared Redis and
// returns its requests per second.
func redisBenchmark(b *testing.B, cmd []string, n int) float64 {
	host, port := "127.0.0.1", "6379"
	if u := strings.TrimPrefix(testkit.RedisURL, "redis://"); u != testkit.RedisURL {
		addr, _, _ := strings.Cut(u, "/")
		host, port, _ = strings.Cut(addr, ":")
	}
	args := append([]string{"-h", host, "-p", port, "-c", strconv.Itoa(benchClients), "-n", strconv.Itoa(n),
		"-r", "2000000000", "--csv"}, cmd...)
	out, err := exec.Command("redis-benchmark", args...).CombinedOutput()
	if err != nil {
		b.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	rows, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(rows) < 2 || len(rows[1]) < 2 {
		b.Fatalf("redis-benchmark said %q", out)
	}
	rps, err := strconv.ParseFloat(rows[1][1], 64)
	if err != nil {
		b.Fatalf("redis-benchmark said %q", out)
	}
	return rps
}
