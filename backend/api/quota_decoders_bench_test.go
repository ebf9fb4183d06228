package api_test

import (
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/api"
	"vouchergate/shared/wire"
)

// The deduct body read by the hand-written scanner and by encoding/json, alone, in the handler
// and over HTTP, to tell whether the scanner pays for itself on the whole request path:
//
//	go test -run '^$' -bench 'DeductReaders(Body|Handler)' -count 5 ./backend/api
//	go test -run '^$' -bench 'DeductReadersHTTP' -benchtime 1x ./backend/api   # a few times
//
// proc-µs/op is the figure to compare: this process's CPU per deduct, which the load of the
// shared machine moves least; rates and ns/op move with it. (Issue 10 measured
// github.com/goccy/go-json too, in commit f9bf67c: no better than encoding/json over HTTP.)

const typicalDeduct = `{"bizId":1,"idemKey":"order-77","items":[{"identityType":"USER","identity":"12345","dimensions":["ITEM:1001","TYPE:GAME"],"amount":1}]}`

// BenchmarkDeductReadersBody reads a typical deduct body.
func BenchmarkDeductReadersBody(b *testing.B) {
	body := []byte(typicalDeduct)
	for _, d := range api.DeductReaders {
		b.Run(d.Name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				var r wire.QuotaDeductRequest
				if err := d.Read(body, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDeductReadersHandler is BenchmarkDeductHandler with each reader: decode, service,
// Redis, encode, in memory.
func BenchmarkDeductReadersHandler(b *testing.B) {
	back, handler, _ := benchStack(b)
	var seq atomic.Int64 // one sequence: an idemKey seen before would be a replay
	for _, d := range api.DeductReaders {
		b.Run(d.Name, func(b *testing.B) {
			api.UseDeductReader(back.App.API, d.Read)
			runDeductHandler(b, handler, &seq)
		})
	}
}

// BenchmarkDeductReadersHTTP sends deducts over 127.0.0.1 TCP, the readers taking turns round
// by round so that the machine's load falls on each alike, and reports each one's medians over
// benchRounds rounds. Run it with -benchtime 1x.
func BenchmarkDeductReadersHTTP(b *testing.B) {
	back, handler, addr := benchStack(b)
	results := make([][]httpResult, len(api.DeductReaders))
	for range benchRounds {
		for i, d := range api.DeductReaders {
			api.UseDeductReader(back.App.API, d.Read)
			results[i] = append(results[i], httpRate(b, handler, addr, 20000, false))
		}
	}
	for i, d := range api.DeductReaders {
		b.Run(d.Name, func(b *testing.B) { report(b, results[i]) })
	}
}

// runDeductHandler calls handler with deducts of one identity from benchClients goroutines,
// their idemKeys numbered by seq, and reports this process's CPU per deduct (Redis is another
// process and does not count).
func runDeductHandler(b *testing.B, handler fasthttp.RequestHandler, seq *atomic.Int64) {
	b.ReportAllocs()
	b.SetParallelism(benchClients / 2)
	cpu0 := procCPU()
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
	b.ReportMetric((procCPU()-cpu0)*1e6/float64(b.N), "proc-µs/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deducts/s")
}
