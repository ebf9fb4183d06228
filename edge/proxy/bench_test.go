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

// granting answers every call 201, in memory: the backend of a benchmark of the edge's own work.
type granting struct{}

var grantedBody = []byte(`{"orderId":"order-0000000042","discountAmount":100}`)

func (granting) Do(_ *fasthttp.Request, resp *fasthttp.Response, _ time.Time) error {
	resp.SetStatusCode(fasthttp.StatusCreated)
	resp.Header.SetContentType("application/json")
	resp.SetBodyRaw(grantedBody)
	return nil
}

// BenchmarkReservation is the edge's whole handler passing on a reservation of a voucher not
// sold out (to a backend answering in memory), with shoppers' tokens off and on: the token's
// verification in each algorithm, the full decode of the body and the subject check.
func BenchmarkReservation(b *testing.B) {
	iss := testkit.NewTokenIssuer(b)
	body := `{"customerId":"customer-000042","orderId":"order-0000000042","orderAmount":150000}`
	for _, alg := range []string{"off", "RS256", "ES256", "EdDSA", "HS256"} {
		b.Run("tokens="+alg, func(b *testing.B) {
			o := Options{Backends: granting{}, BackendTimeout: time.Second, SoldOut: soldout.New(soldout.Options{TTL: time.Hour}),
				Refresher: askNothing{}, MaxAPIBodyBytes: 8192, Log: testkit.QuietLog, APIKey: "vg_edge_key"}
			ctx := soldOutRequest(body)
			if alg != "off" {
				o.Tokens = newVerifier(b, iss)
				ctx.Request.Header.Set("Authorization", "Bearer "+iss.Sign(b, alg, iss.Claims("customer-000042")))
			}
			p := New(o)
			b.ReportAllocs()
			for b.Loop() {
				ctx.Response.Reset()
				p.Handle(ctx)
			}
			if ctx.Response.StatusCode() != 201 {
				b.Fatalf("status %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
		})
	}
}

// BenchmarkSoldOutHandlerWithTokens is BenchmarkSoldOutHandler with tokens on (RS256): a new
// order of a sold-out voucher is answered from memory before its token is verified, so it should
// cost what it costs with tokens off.
func BenchmarkSoldOutHandlerWithTokens(b *testing.B) {
	iss := testkit.NewTokenIssuer(b)
	p := benchProxy(b)
	p.opts.Tokens = newVerifier(b, iss)
	ctx := soldOutRequest(`{"customerId":"customer-000042","orderId":"late-order-0000000042","orderAmount":150000}`)
	ctx.Request.Header.Set("Authorization", "Bearer "+iss.Sign(b, "RS256", iss.Claims("customer-000042")))
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		p.Handle(ctx)
	}
	if ctx.Response.StatusCode() != 409 {
		b.Fatalf("status %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
}
