package load

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// startVoucher starts a server that grants uses reservations, each to a customer and order it
// has not seen, then answers 409 OUT_OF_STOCK. It fails the test on a repeated customer or order.
func startVoucher(t *testing.T, uses int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	customers, orders := map[string]bool{}, map[string]bool{}
	var granted atomic.Int64
	s := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		var req struct{ CustomerID, OrderID string }
		if err := json.Unmarshal(ctx.PostBody(), &req); err != nil || req.CustomerID == "" || req.OrderID == "" {
			t.Errorf("bad reservation %q", ctx.PostBody())
		}
		mu.Lock()
		if customers[req.CustomerID] || orders[req.OrderID] {
			t.Errorf("customer %s or order %s seen before", req.CustomerID, req.OrderID)
		}
		customers[req.CustomerID], orders[req.OrderID] = true, true
		mu.Unlock()
		if granted.Add(1) <= uses {
			ctx.SetStatusCode(201)
			ctx.SetBodyString(`{"orderId":"x","discountAmount":1}`)
			return
		}
		ctx.SetStatusCode(409)
		ctx.SetBodyString(`{"error":"OUT_OF_STOCK"}`)
	}}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { _ = s.Shutdown() })
	return ln.Addr().String()
}

func TestSaleMeasuresTheSellOutAndStopsAfterItsTail(t *testing.T) {
	addr := startVoucher(t, 500)
	// The limit is far off: a sale that ends by it (r.Limited) did not stop after its tail.
	r, err := Sale(context.Background(), addr, SaleSettings{Conns: 8, Code: "SALE", Prefix: "o-", Customers: "c-",
		Uses: 500, Tail: 100 * time.Millisecond, Limit: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if r.Granted() != 500 || r.Statuses[409] != r.OutOfStock || r.Requests != 500+r.OutOfStock || r.Errors != 0 {
		t.Fatalf("result %+v", r)
	}
	if r.SoldOut <= 0 || r.SoldOut > r.Elapsed || r.Won.Count() != 500 || r.Limited {
		t.Fatalf("sold out at %v of %v, %d winners' latencies", r.SoldOut, r.Elapsed, r.Won.Count())
	}
	if r.During.Count() < 500 || r.After.Count() == 0 || r.During.Count()+r.After.Count() != r.Requests {
		t.Fatalf("%d requests during the sale, %d after, of %d", r.During.Count(), r.After.Count(), r.Requests)
	}
}

func TestSaleThatNeverSellsOutEndsAtItsLimit(t *testing.T) {
	addr := startVoucher(t, 1<<40)
	// The tail is far off: a sale that waited it without a sell-out would run an hour.
	r, err := Sale(context.Background(), addr, SaleSettings{Conns: 2, Code: "SALE", Prefix: "n-", Uses: 1 << 30,
		Tail: time.Hour, Limit: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.SoldOut != 0 || r.Granted() == 0 || r.After.Count() != 0 || r.Elapsed >= time.Hour || !r.Limited {
		t.Fatalf("result %+v", r)
	}
}

func TestSaleOnlyLoadsThisMachine(t *testing.T) {
	if _, err := Sale(context.Background(), "10.0.0.1:80", SaleSettings{Conns: 1, Uses: 1, Limit: time.Second}); !errors.Is(err, ErrNotLocal) {
		t.Fatalf("err = %v; want ErrNotLocal", err)
	}
}
