package proxy

import (
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/edge/soldout"
	"vouchergate/shared/events"
	"vouchergate/testkit"
)

// benchProxy is a Proxy whose cache holds a sold-out voucher with 1,000 holders.
func benchProxy(b *testing.B) *Proxy {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("granted-%d", i)
	}
	cache := soldout.New(soldout.Options{TTL: time.Hour, RefreshAfter: 30 * time.Minute})
	if err := cache.Apply(events.VoucherState{Code: "FLASH", SoldOut: true, Holders: events.NewHolderFilter(ids)}); err != nil {
		b.Fatal(err)
	}
	return New(Options{SoldOut: cache, Refresher: askNothing{}, MaxAPIBodyBytes: 8192, Log: testkit.QuietLog})
}

type askNothing struct{}

func (askNothing) Ask(string) {}

// BenchmarkSoldOutHandler is the edge's whole handler answering a new order for a sold-out
// voucher: route, read the orderId, test the holders, write the 409. It allocates only the 2
// copies bigcache's Get makes (key and record) in the sold-out cache.
func BenchmarkSoldOutHandler(b *testing.B) {
	p := benchProxy(b)
	ctx := soldOutRequest(`{"customerId":"customer-000042","orderId":"late-order-0000000042","orderAmount":150000}`)
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		p.Handle(ctx)
	}
	if ctx.Response.StatusCode() != 409 {
		b.Fatalf("status %d", ctx.Response.StatusCode())
	}
}

// BenchmarkBareHandler is a handler that only writes the same 409, for comparison.
func BenchmarkBareHandler(b *testing.B) {
	ctx := soldOutRequest(`{"customerId":"customer-000042","orderId":"late-order-0000000042","orderAmount":150000}`)
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		ctx.SetStatusCode(fasthttp.StatusConflict)
		ctx.SetContentType("application/json")
		ctx.SetBody(soldOutBody)
	}
}
