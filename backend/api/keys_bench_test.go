package api_test

import (
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/api"
	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

// BenchmarkReserveKeyCheck reserves flash voucher uses in memory (route, key check, decode,
// Redis gate, batched PostgreSQL write, answer) through two servers over the same services and
// stores: "keys" checks a service API key on every request, "no-keys" has none configured. Both
// send the same request with the key, so the check is the only difference. Each reservation is a
// new customer and order, so every one takes a use.
func BenchmarkReserveKeyCheck(b *testing.B) {
	path := filepath.Join(b.TempDir(), "keys.yaml")
	backendtest.WriteKeys(b, path, testKeys...)
	cfg := backendtest.Config(b)
	cfg.APIKeysFile = path
	back := backendtest.Start(b, cfg)
	back.CreateVoucher(b, backendtest.Voucher{Code: "KEYBENCH", Discount: 100, TotalLimit: wire.MaxTotalLimit, FlashSale: true})

	withKeys := back.App.API.Handle
	withoutKeys := api.New(api.Options{Vouchers: back.App.Vouchers, Quotas: back.App.Quotas,
		RequestTimeout: cfg.RequestTimeout, DBTimeout: cfg.DBTimeout, MaxBodyBytes: cfg.MaxBodyBytes}).Handle
	var seq atomic.Int64
	for _, s := range []struct {
		name    string
		handler fasthttp.RequestHandler
	}{{"no-keys", withoutKeys}, {"keys", withKeys}} {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(benchClients / 2) // 2 cores: 64 in flight, enough for the writer's batches
			b.RunParallel(func(pb *testing.PB) {
				var ctx fasthttp.RequestCtx
				body := make([]byte, 0, 96)
				for pb.Next() {
					n := strconv.FormatInt(seq.Add(1), 10)
					body = append(body[:0], `{"customerId":"c`+n+`","orderId":"kb-`+n+`","orderAmount":100}`...)
					ctx.Request.Reset()
					ctx.Response.Reset()
					ctx.Request.Header.SetMethod("POST")
					ctx.Request.SetRequestURI("/vouchers/KEYBENCH/reservations")
					ctx.Request.Header.Set("X-API-Key", secretReserve)
					ctx.Request.SetBody(body)
					s.handler(&ctx)
					if ctx.Response.StatusCode() != 201 {
						b.Errorf("reservation %s: %d %s", n, ctx.Response.StatusCode(), ctx.Response.Body())
						return
					}
				}
			})
		})
	}
}

// BenchmarkKeyCheck is the check alone, on an answer that needs no store: a reservation with a
// body that does not decode (400), with and without keys configured, so the difference is the
// key check's cost (hashing the key, the map lookup, the scope test).
func BenchmarkKeyCheck(b *testing.B) {
	path := filepath.Join(b.TempDir(), "keys.yaml")
	backendtest.WriteKeys(b, path, testKeys...)
	cfg := backendtest.Config(b)
	cfg.APIKeysFile = path
	back := backendtest.Start(b, cfg)
	withoutKeys := api.New(api.Options{Vouchers: back.App.Vouchers, MaxBodyBytes: cfg.MaxBodyBytes}).Handle
	for _, s := range []struct {
		name    string
		handler fasthttp.RequestHandler
	}{{"no-keys", withoutKeys}, {"keys", back.App.API.Handle}} {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			var ctx fasthttp.RequestCtx
			for range b.N {
				ctx.Request.Reset()
				ctx.Response.Reset()
				ctx.Request.Header.SetMethod("POST")
				ctx.Request.SetRequestURI("/vouchers/KEYBENCH/reservations")
				ctx.Request.Header.Set("X-API-Key", secretReserve)
				ctx.Request.SetBodyString(`{"customerId":`)
				s.handler(&ctx)
				if ctx.Response.StatusCode() != 400 {
					b.Fatalf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
				}
			}
		})
	}
}
