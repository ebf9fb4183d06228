package quotaapi_test

import (
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/quotaapi"
	"vouchergate/shared/wire"
)

// The deduct body read three ways, alone, in the handler and over HTTP, to tell whether the
// hand-written decoder pays for itself on the whole request path:
//
//	go test -run '^$' -bench 'DeductDecoders' -count 5 ./backend/quotaapi

const typicalDeduct = `{"bizId":1,"idemKey":"order-77","items":[{"identityType":"USER","identity":"12345","dimensions":["ITEM:1001","TYPE:GAME"],"amount":1}]}`

// BenchmarkDeductDecodersBody decodes a typical deduct body.
func BenchmarkDeductDecodersBody(b *testing.B) {
	body := []byte(typicalDeduct)
	for _, d := range quotaapi.DeductDecoders {
		b.Run(d.Name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				var r wire.QuotaDeductRequest
				if err := d.Decode(body, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDeductDecodersHandler is BenchmarkDeductHandler with each decoder: decode, service,
// Redis, encode, in memory.
func BenchmarkDeductDecodersHandler(b *testing.B) {
	h, _, handler, _ := benchHandlers(b)
	var seq atomic.Int64 // one sequence: an idemKey seen before would be a replay
	for _, d := range quotaapi.DeductDecoders {
		b.Run(d.Name, func(b *testing.B) {
			quotaapi.UseDeductDecoder(h, d.Decode)
			runDeductHandler(b, handler, &seq)
		})
	}
}

// BenchmarkDeductDecodersHTTP sends deducts over 127.0.0.1 TCP, the decoders taking turns
// round by round so that the machine's load falls on each alike; it reports each one's medians
// over benchRounds rounds, proc-µs/op (server and load client CPU per deduct) first among them.
func BenchmarkDeductDecodersHTTP(b *testing.B) {
	h, _, handler, addr := benchHandlers(b)
	results := make([][]httpResult, len(quotaapi.DeductDecoders))
	for range benchRounds {
		for i, d := range quotaapi.DeductDecoders {
			quotaapi.UseDeductDecoder(h, d.Decode)
			results[i] = append(results[i], httpRate(b, handler, addr, 20000, false))
		}
	}
	for i, d := range quotaapi.DeductDecoders {
		b.Run(d.Name, func(b *testing.B) { report(b, results[i]) })
	}
}

// runDeductHandler calls handler with deducts of one identity from benchClients goroutines,
// their idemKeys numbered by seq.
func runDeductHandler(b *testing.B, handler fasthttp.RequestHandler, seq *atomic.Int64) {
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
