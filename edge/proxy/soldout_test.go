package proxy

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/events"
	"vouchergate/testkit"
)

func TestSoldOutVoucherIsAnsweredAtTheEdge(t *testing.T) {
	b := newFakeBackend(map[string]int{"FLASH": 2})
	addr, _ := testkit.ServeHTTP(t, b.handle)
	e := startEdge(t, edgeConfig{backends: []string{addr}})
	if err := e.cache.Apply(soldOutState("FLASH", "o-1", "o-2")); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		a := e.reserve(t, "FLASH", fmt.Sprintf("new-%d", i))
		if a.status != 409 || a.body != `{"error":"OUT_OF_STOCK"}` {
			t.Fatalf("new order on a sold-out voucher: %d %s", a.status, a.body)
		}
	}
	if n := b.reserves.Load(); n != 0 {
		t.Fatalf("backend saw %d reservations of a sold-out voucher; want 0", n)
	}
}

func TestGrantedOrderRetryGoesThroughAfterTheSellOut(t *testing.T) {
	b := newFakeBackend(map[string]int{"FLASH": 2})
	addr, _ := testkit.ServeHTTP(t, b.handle)
	e := startEdge(t, edgeConfig{backends: []string{addr}})
	for _, id := range []string{"o-1", "o-2"} {
		if a := e.reserve(t, "FLASH", id); a.status != 201 {
			t.Fatalf("reserve %s: %d %s", id, a.status, a.body)
		}
	}
	_ = e.cache.Apply(soldOutState("FLASH", "o-1", "o-2"))
	for _, id := range []string{"o-1", "o-2"} {
		a := e.reserve(t, "FLASH", id)
		if a.status != 201 || a.body != `{"orderId":"`+id+`","discountAmount":100}` {
			t.Fatalf("retry of granted %s through an edge that knows the sell-out: %d %s", id, a.status, a.body)
		}
	}
}

func TestUnreadableOrderIsLeftToTheBackend(t *testing.T) {
	b := newFakeBackend(map[string]int{"FLASH": 1})
	addr, _ := testkit.ServeHTTP(t, b.handle)
	e := startEdge(t, edgeConfig{backends: []string{addr}})
	_ = e.cache.Apply(soldOutState("FLASH", "o-1"))
	a := e.do(t, "POST", "/vouchers/FLASH/reservations", `{"orderId":`)
	if a.status != 400 || errorCode(t, a) != "BAD_REQUEST" {
		t.Fatalf("malformed body: %d %s; want the backend's 400", a.status, a.body)
	}
	if b.reserves.Load() != 1 {
		t.Fatal("malformed body not forwarded")
	}
}

func TestPassing409TeachesTheEdgeTheHolders(t *testing.T) {
	b := newFakeBackend(map[string]int{"FLASH": 1})
	addr, _ := testkit.ServeHTTP(t, b.handle)
	e := startEdge(t, edgeConfig{backends: []string{addr}})
	if a := e.reserve(t, "FLASH", "winner"); a.status != 201 {
		t.Fatalf("first reservation: %d %s", a.status, a.body)
	}
	if a := e.reserve(t, "FLASH", "late-0"); a.status != 409 {
		t.Fatalf("second reservation: %d %s", a.status, a.body)
	}
	testkit.Eventually(t, "holders read after the passing 409", func() bool { en, _ := e.cache.Lookup([]byte("FLASH"), time.Now()); return en != nil })
	before := b.reserves.Load()
	for i := range 100 {
		if a := e.reserve(t, "FLASH", fmt.Sprintf("late-%d", i+1)); a.status != 409 {
			t.Fatalf("late order: %d %s", a.status, a.body)
		}
	}
	if n := b.reserves.Load() - before; n != 0 {
		t.Fatalf("backend saw %d late orders after the edge learned; want 0", n)
	}
	if a := e.reserve(t, "FLASH", "winner"); a.status != 201 {
		t.Fatalf("winner's retry: %d %s", a.status, a.body)
	}
}

func TestBackInStockFromTheBackendClearsTheEntry(t *testing.T) {
	b := newFakeBackend(map[string]int{"FLASH": 1})
	addr, _ := testkit.ServeHTTP(t, b.handle)
	e := startEdge(t, edgeConfig{backends: []string{addr}})
	e.reserve(t, "FLASH", "winner")
	e.reserve(t, "FLASH", "late")
	testkit.Eventually(t, "sell-out learned", func() bool { en, _ := e.cache.Lookup([]byte("FLASH"), time.Now()); return en != nil })
	b.release("FLASH", "winner")
	// The holder's retry is forwarded; the backend, back in stock, grants it; a new order that
	// reaches the backend and is refused would teach the edge again, but here it is granted.
	e.refresher.Ask("FLASH")
	testkit.Eventually(t, "back in stock learned", func() bool { en, _ := e.cache.Lookup([]byte("FLASH"), time.Now()); return en == nil })
	if a := e.reserve(t, "FLASH", "next"); a.status != 201 {
		t.Fatalf("reservation after the release: %d %s", a.status, a.body)
	}
}

// TestSoldOutPathAllocatesOnlyBigcachesCopies: the sold-out cache keeps its entries in bigcache,
// whose Get (v3.1.0) copies the key and the value; nothing else on the path may allocate.
func TestSoldOutPathAllocatesOnlyBigcachesCopies(t *testing.T) {
	b := newFakeBackend(map[string]int{"FLASH": 1})
	addr, _ := testkit.ServeHTTP(t, b.handle)
	e := startEdge(t, edgeConfig{backends: []string{addr}})
	_ = e.cache.Apply(soldOutState("FLASH", "o-1"))
	for _, body := range []string{
		`{"customerId":"c-1","orderId":"order-000001","orderAmount":1000}`,
		`{"customerId":"c-1","orderId":"order-\u00e9","orderAmount":1000}`,
	} {
		ctx := soldOutRequest(body)
		n := testing.AllocsPerRun(1000, func() {
			ctx.Response.Reset()
			e.proxy.Handle(ctx)
			if ctx.Response.StatusCode() != 409 {
				panic(fmt.Sprintf("status %d", ctx.Response.StatusCode()))
			}
		})
		if n > 2 {
			t.Errorf("sold-out answer to %s allocates %v times; want at most bigcache's 2 copies", body, n)
		}
	}
}

// A sold-out voucher's dry run allocates no more than its reservation.
func TestSoldOutValidateAllocatesOnlyBigcachesCopies(t *testing.T) {
	b := newFakeBackend(map[string]int{"FLASH": 1})
	addr, _ := testkit.ServeHTTP(t, b.handle)
	e := startEdge(t, edgeConfig{backends: []string{addr}})
	_ = e.cache.Apply(soldOutState("FLASH", "o-1"))
	ctx := soldOutRequest(`{"customerId":"c-1","orderId":"order-000001","orderAmount":1000}`)
	ctx.Request.SetRequestURI("/vouchers/FLASH/validate")
	n := testing.AllocsPerRun(1000, func() {
		ctx.Response.Reset()
		e.proxy.Handle(ctx)
		if ctx.Response.StatusCode() != 200 {
			panic(fmt.Sprintf("status %d", ctx.Response.StatusCode()))
		}
	})
	if n > 2 {
		t.Errorf("sold-out dry run allocates %v times; want at most bigcache's 2 copies", n)
	}
}

func soldOutRequest(body string) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/vouchers/FLASH/reservations")
	req.Header.SetHost("edge.test")
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
	ctx := &fasthttp.RequestCtx{}
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	return ctx
}

// A sold-out voucher's dry run is answered at the edge as the backend would answer it, unless
// its order may hold a use; any other dry run, and a quota check, goes to the backend.
func TestSoldOutValidateIsAnsweredAtTheEdge(t *testing.T) {
	b := newFakeBackend(map[string]int{"FLASH": 1})
	addr, _ := testkit.ServeHTTP(t, b.handle)
	e := startEdge(t, edgeConfig{backends: []string{addr}})
	validate := func(code, order string) answerOf {
		return e.do(t, "POST", "/vouchers/"+code+"/validate", `{"customerId":"c","orderId":"`+order+`","orderAmount":100}`)
	}
	if a := validate("FLASH", "new-0"); a.status != 200 || a.body != `{"path":"/vouchers/FLASH/validate"}` {
		t.Fatalf("dry run of a voucher not known sold out: %d %s; want it forwarded", a.status, a.body)
	}
	_ = e.cache.Apply(soldOutState("FLASH", "o-1"))
	before := b.other.Load()
	for i := range 50 {
		a := validate("FLASH", fmt.Sprintf("new-%d", i))
		if a.status != 200 || a.body != `{"valid":false,"error":"OUT_OF_STOCK"}` {
			t.Fatalf("dry run on a sold-out voucher: %d %s", a.status, a.body)
		}
	}
	if n := b.other.Load() - before; n != 0 {
		t.Fatalf("backend saw %d dry runs of a sold-out voucher; want 0", n)
	}
	if a := validate("FLASH", "o-1"); a.status != 200 || a.body != `{"path":"/vouchers/FLASH/validate"}` {
		t.Fatalf("dry run of a holder's order: %d %s; want it forwarded", a.status, a.body)
	}
	if a := e.do(t, "GET", "/vouchers/FLASH/validate", ""); a.status != 405 {
		t.Fatalf("GET validate: %d %s; want 405", a.status, a.body)
	}
	if a := e.do(t, "POST", "/quotas/check", `{}`); a.status != 200 || a.body != `{"path":"/quotas/check"}` {
		t.Fatalf("quota check: %d %s; want it forwarded", a.status, a.body)
	}
}

func pausedState(code string, soldOut bool, holders ...string) events.VoucherState {
	s := soldOutState(code, holders...)
	s.SoldOut, s.Paused = soldOut, true
	return s
}

// A paused voucher's new orders, and their dry runs, are answered at the edge as the backend
// answers them (NOT_ELIGIBLE, PAUSED: paused first, sold out or not), for the code in any case;
// a holder's retry goes to the backend, and resuming lets new orders through again.
func TestPausedVoucherIsAnsweredAtTheEdge(t *testing.T) {
	for _, soldOut := range []bool{false, true} {
		t.Run(fmt.Sprintf("soldOut=%v", soldOut), func(t *testing.T) {
			b := newFakeBackend(map[string]int{"FLASH": 5})
			addr, _ := testkit.ServeHTTP(t, b.handle)
			e := startEdge(t, edgeConfig{backends: []string{addr}})
			if a := e.reserve(t, "FLASH", "o-1"); a.status != 201 {
				t.Fatalf("reserve o-1: %d %s", a.status, a.body)
			}
			if err := e.cache.Apply(pausedState("FLASH", soldOut, "o-1")); err != nil {
				t.Fatal(err)
			}
			before := b.reserves.Load()
			for i, code := range []string{"FLASH", "flash", "Flash"} {
				a := e.reserve(t, code, fmt.Sprintf("new-%d", i))
				if a.status != 422 || a.body != `{"error":"NOT_ELIGIBLE","reason":"PAUSED"}` {
					t.Fatalf("new order of paused %s: %d %s", code, a.status, a.body)
				}
				a = e.do(t, "POST", "/vouchers/"+code+"/validate", `{"customerId":"c","orderId":"new-v","orderAmount":100}`)
				if a.status != 200 || a.body != `{"valid":false,"error":"NOT_ELIGIBLE","reason":"PAUSED"}` {
					t.Fatalf("dry run of paused %s: %d %s", code, a.status, a.body)
				}
			}
			if n := b.reserves.Load() - before; n != 0 {
				t.Fatalf("backend saw %d reservations of a paused voucher; want 0", n)
			}
			if a := e.reserve(t, "FLASH", "o-1"); a.status != 201 {
				t.Fatalf("a holder's retry while paused: %d %s; want it forwarded and granted again", a.status, a.body)
			}
			resumed := soldOutState("FLASH")
			resumed.SoldOut = false
			resumed.Holders = nil
			if err := e.cache.Apply(resumed); err != nil {
				t.Fatal(err)
			}
			if a := e.reserve(t, "flash", "after"); a.status != 201 {
				t.Fatalf("new order once resumed: %d %s", a.status, a.body)
			}
		})
	}
}

// A paused voucher's answer from memory allocates no more than a sold-out one's.
func TestPausedPathAllocatesOnlyBigcachesCopies(t *testing.T) {
	b := newFakeBackend(map[string]int{"FLASH": 1})
	addr, _ := testkit.ServeHTTP(t, b.handle)
	e := startEdge(t, edgeConfig{backends: []string{addr}})
	_ = e.cache.Apply(pausedState("FLASH", false, "o-1"))
	for uri, status := range map[string]int{"/vouchers/flash/reservations": 422, "/vouchers/FLASH/validate": 200} {
		ctx := soldOutRequest(`{"customerId":"c-1","orderId":"order-000001","orderAmount":1000}`)
		n := testing.AllocsPerRun(1000, func() {
			ctx.Request.SetRequestURI(uri) // matchPath upper-cases the code in place: give it the path as sent
			ctx.Response.Reset()
			e.proxy.Handle(ctx)
			if ctx.Response.StatusCode() != status {
				panic(fmt.Sprintf("status %d", ctx.Response.StatusCode()))
			}
		})
		if n > 2 {
			t.Errorf("paused answer to %s allocates %v times; want at most bigcache's 2 copies", uri, n)
		}
	}
}
