package app_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/edge/proxy"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// pausedAnswer is what a paused voucher's new order gets, from the edge's memory.
const pausedAnswer = `{"error":"NOT_ELIGIBLE","reason":"PAUSED"}`

// editVoucher sends PATCH /admin/vouchers/{code} to a backend and fails the test unless 200.
func editVoucher(t *testing.T, b *backendtest.Backend, code, body string) {
	t.Helper()
	if st, answer := b.Do(t, "PATCH", "/admin/vouchers/"+code, body); st != 200 {
		t.Fatalf("PATCH %s %s: %d %s", code, body, st, answer)
	}
}

// pausedAtTheEdge reports whether the edge answers code's new orders as paused from memory.
func (e *edge) pausedAtTheEdge(code string) bool {
	en, _ := e.App.Cache.Lookup([]byte(code), time.Now())
	return en != nil && en.Paused()
}

// grant reserves n orders of code through the edge, "<code>-order-i" by "cust-i", and fails the
// test unless each is granted. It returns the orders.
func (e *edge) grant(t *testing.T, code string, n int) []string {
	t.Helper()
	var granted []string
	for i := range n {
		order := fmt.Sprintf("%s-order-%d", code, i)
		if a := e.reserve(t, code, fmt.Sprintf("cust-%d", i), order); a.Status != 201 {
			t.Fatalf("reserve %s: %d %s", order, a.Status, a.Body)
		}
		granted = append(granted, order)
	}
	return granted
}

// A pause mid-sale reaches the edges over NATS within a second, and they answer the paused
// voucher's new orders from memory (422 NOT_ELIGIBLE PAUSED, the code in any case), with every
// backend killed, for as long as the state bucket says so; granted orders still go to a backend
// (and get their 201 once one is back); resumed, new orders are sold again within a second.
func TestPauseAnsweredAtTheEdgeWithTheBackendDown(t *testing.T) {
	cfg := backendtest.Config(t)
	p := backendtest.StartProcess(t, cfg)
	admin := p.Client()
	e := startEdge(t, shieldConfig(cfg.NATSURL, cfg.NATSPrefix, p.Addr(), scale))
	admin.CreateVoucher(t, backendtest.Voucher{Code: "HALT", Discount: 5000, TotalLimit: 10, FlashSale: true})
	granted := e.grant(t, "HALT", 3)
	editVoucher(t, admin, "HALT", `{"active":false}`)
	paused := time.Now()
	testkit.Eventually(t, "the edge learns the pause over NATS", func() bool { return e.pausedAtTheEdge("HALT") })
	if took := time.Since(paused); took > time.Second {
		t.Errorf("the edge learned the pause %v after it; want within a second", took)
	}
	p.Kill()
	killed := time.Now()
	for i, at := range []time.Duration{0, 6 * time.Second, 30 * time.Second, 60 * time.Second} {
		time.Sleep(time.Until(killed.Add(at / scale)))
		for _, code := range []string{"HALT", "halt"} {
			if a := e.reserve(t, code, fmt.Sprintf("new-%d", i), fmt.Sprintf("new-order-%d", i)); a.Status != 422 || a.Body != pausedAnswer {
				t.Fatalf("a new order of paused %s %v (at the defaults) after every backend was killed: %d %s; want the edge's %s",
					code, at, a.Status, a.Body, pausedAnswer)
			}
		}
		a := e.do(t, "POST", "/vouchers/halt/validate", `{"customerId":"v","orderId":"new-v","orderAmount":100}`)
		if a.Status != 200 || a.Body != `{"valid":false,"error":"NOT_ELIGIBLE","reason":"PAUSED"}` {
			t.Fatalf("a dry run of the paused voucher with every backend killed: %d %s", a.Status, a.Body)
		}
	}
	if a := e.reserve(t, "HALT", "cust-0", granted[0]); a.Status != 503 {
		t.Fatalf("a holder's retry with every backend down: %d %s; want 503 (forwarded), not 422", a.Status, a.Body)
	}
	m := testkit.ScrapeMetrics(t, "http://"+e.Ops+"/metrics")
	if n := m.Value(t, "vg_edge_paused_answers_total"); n < 8 {
		t.Errorf("vg_edge_paused_answers_total = %v; want the 8 answers given", n)
	}

	p.Start()
	admin = p.Client()
	testkit.Eventually(t, "the backend back in service", func() bool { return e.App.Pool.Healthy() == 1 })
	for i, order := range granted {
		a := e.reserve(t, "HALT", fmt.Sprintf("cust-%d", i), order)
		for try := 0; a.Status >= 502 && try < 20; try++ { // a connection to the killed process, retried as a client would
			time.Sleep(50 * time.Millisecond)
			a = e.reserve(t, "HALT", fmt.Sprintf("cust-%d", i), order)
		}
		if a.Status != 201 || discountOf(t, a.Body) != 5000 {
			t.Errorf("retry of granted %s while paused: %d %s; want its 201", order, a.Status, a.Body)
		}
	}
	editVoucher(t, admin, "HALT", `{"active":true}`)
	resumed := time.Now()
	for i := 0; ; i++ {
		a := e.reserve(t, "HALT", fmt.Sprintf("after-%d", i), fmt.Sprintf("after-order-%d", i))
		if a.Status == 201 {
			break
		}
		if a.Status != 422 || time.Since(resumed) > time.Second {
			t.Fatalf("a new order %v after the resume: %d %s", time.Since(resumed).Round(time.Millisecond), a.Status, a.Body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A sale put off after it granted orders (startsAt moved an hour ahead, then paused): through
// the edge, granted orders keep their 201 with the discount they were given and their dry run
// says valid, while new orders are refused NOT_STARTED by the backend, then PAUSED from the
// edge's memory.
func TestPostponedSaleKeepsGrantedOrdersThroughTheEdge(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.Start(t, cfg)
	e := startEdge(t, edgeConfig(cfg.NATSURL, cfg.NATSPrefix, b.Addr))
	b.CreateVoucher(t, backendtest.Voucher{Code: "LATER", Discount: 5000, TotalLimit: 5, FlashSale: true})
	granted := e.grant(t, "LATER", 2)
	starts := time.Now().Add(time.Hour).UTC()
	editVoucher(t, b, "LATER", fmt.Sprintf(`{"discountAmount":100,"startsAt":%q,"endsAt":%q}`,
		starts.Format(time.RFC3339), starts.Add(24*time.Hour).Format(time.RFC3339)))
	keeps := func(when, reason string) {
		t.Helper()
		for i, order := range granted {
			customer := fmt.Sprintf("cust-%d", i)
			if a := e.reserve(t, "later", customer, order); a.Status != 201 || discountOf(t, a.Body) != 5000 {
				t.Errorf("retry of granted %s through the edge %s: %d %s; want its 201 with 5000 off", order, when, a.Status, a.Body)
			}
			body := fmt.Sprintf(`{"customerId":%q,"orderId":%q,"orderAmount":10000}`, customer, order)
			if a := e.do(t, "POST", "/vouchers/LATER/validate", body); a.Status != 200 || a.Body != `{"valid":true,"discountAmount":5000}` {
				t.Errorf("dry run of granted %s through the edge %s: %d %s; want valid with 5000 off", order, when, a.Status, a.Body)
			}
		}
		if a := e.reserve(t, "LATER", "new", "new-"+when); a.Status != 422 || !strings.Contains(a.Body, `"reason":"`+reason+`"`) {
			t.Errorf("a new order through the edge %s: %d %s; want 422 NOT_ELIGIBLE %s", when, a.Status, a.Body, reason)
		}
	}
	keeps("postponed", wire.ReasonNotStarted)
	editVoucher(t, b, "LATER", `{"active":false}`)
	testkit.Eventually(t, "the edge learns the pause over NATS", func() bool { return e.pausedAtTheEdge("LATER") })
	keeps("postponed-and-paused", wire.ReasonPaused)
	b.CheckInvariants(t, "LATER", granted)
}

// A sold-out voucher whose limit is raised is sold again through the edges within a second:
// the edit's new state (back in stock) reaches them over NATS.
func TestRaisedLimitReachesTheEdgeWithinASecond(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.Start(t, cfg)
	e := startEdge(t, edgeConfig(cfg.NATSURL, cfg.NATSPrefix, b.Addr))
	sellOut(t, b, e, "MORE", 3)
	if a := e.reserve(t, "MORE", "late", "late-0"); a.Status != 409 {
		t.Fatalf("first late order: %d %s", a.Status, a.Body)
	}
	testkit.Eventually(t, "the edge holds the sell-out", func() bool { return e.knows("MORE") })
	editVoucher(t, b, "MORE", `{"totalLimit":5}`)
	soldAgainWithinASecond(t, e, "more", "the raise", 2)
	if a := e.reserve(t, "MORE", "last", "last-0"); a.Status != 409 {
		t.Errorf("past the raised limit: %d %s; want 409", a.Status, a.Body)
	}
	b.CheckInvariants(t, "MORE", nil)
}

// soldAgainWithinASecond sends new orders of code through the edge, answered 409 until it
// learns the voucher is back in stock, until n are granted, and fails the test unless that
// takes less than a second from now (what happened: after). It returns the orders granted.
func soldAgainWithinASecond(t *testing.T, e *edge, code, after string, n int) []string {
	t.Helper()
	since := time.Now()
	var sold []string
	for i := 0; len(sold) < n; i++ {
		order := fmt.Sprintf("new-order-%d", i)
		switch a := e.reserve(t, code, fmt.Sprintf("new-%d", i), order); {
		case a.Status == 201:
			sold = append(sold, order)
		case a.Status != 409 || time.Since(since) > time.Second:
			t.Fatalf("a new order %v after %s: %d %s", time.Since(since).Round(time.Millisecond), after, a.Status, a.Body)
		default:
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Logf("sold again %v after %s", time.Since(since).Round(time.Millisecond), after)
	return sold
}

// A refund on a sold-out flash voucher sells its use again through the edges within a second:
// the back-in-stock state reaches them over NATS (their own sold-out entry would last a minute,
// with no reading ahead).
func TestRefundReachesTheEdgeWithinASecond(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.Start(t, cfg)
	ecfg := edgeConfig(cfg.NATSURL, cfg.NATSPrefix, b.Addr)
	ecfg.SoldOutTTL, ecfg.SoldOutRefresh = time.Minute, 0
	e := startEdge(t, ecfg)
	granted := sellOutAndLearn(t, b, e, "REFUNDED", 3)
	base := "/vouchers/REFUNDED/reservations/" + granted[0]
	if a := e.do(t, "POST", base+"/confirm", ""); a.Status != 200 {
		t.Fatalf("confirm %s through the edge: %d %s", granted[0], a.Status, a.Body)
	}
	if a := e.do(t, "POST", base+"/refund", ""); a.Status != 200 {
		t.Fatalf("refund %s through the edge: %d %s", granted[0], a.Status, a.Body)
	}
	resold := soldAgainWithinASecond(t, e, "REFUNDED", "the refund", 1)
	if a := e.reserve(t, "REFUNDED", "last", "last-0"); a.Status != 409 {
		t.Errorf("past the use the refund gave back: %d %s; want 409", a.Status, a.Body)
	}
	b.CheckInvariants(t, "REFUNDED", append(granted[1:], resold...))
}

// Through the edge, a voucher's code is taken in any case on every route that names one, and a
// sold-out voucher's new orders are answered from memory whatever the case sent.
func TestCodesInAnyCaseThroughTheEdge(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.Start(t, cfg)
	e := startEdge(t, edgeConfig(cfg.NATSURL, cfg.NATSPrefix, b.Addr))
	b.CreateVoucher(t, backendtest.Voucher{Code: "MIXED", Discount: 10, TotalLimit: 2, FlashSale: true})
	routes := []struct {
		proxy.Endpoint
		uri, body string
		status    int
	}{
		{proxy.Endpoint{Method: "POST", Path: "/vouchers/{code}/validate"}, "/vouchers/mixed/validate", `{"customerId":"a","orderId":"a1","orderAmount":100}`, 200},
		{proxy.Endpoint{Method: "POST", Path: "/vouchers/{code}/reservations"}, "/vouchers/Mixed/reservations", `{"customerId":"a","orderId":"a1","orderAmount":100}`, 201},
		{proxy.Endpoint{Method: "POST", Path: "/vouchers/{code}/reservations/{orderId}/confirm"}, "/vouchers/mIXED/reservations/a1/confirm", "", 200},
		{proxy.Endpoint{Method: "POST", Path: "/vouchers/{code}/reservations/{orderId}/refund"}, "/vouchers/mixed/reservations/a1/refund", "", 200},
		{proxy.Endpoint{Method: "DELETE", Path: "/vouchers/{code}/reservations/{orderId}"}, "/vouchers/mixed/reservations/a1", "", 409},
	}
	covered := map[proxy.Endpoint]bool{}
	for _, r := range routes {
		covered[r.Endpoint] = true
		if a := e.do(t, r.Method, r.uri, r.body); a.Status != r.status {
			t.Errorf("%s %s through the edge: %d %s; want %d", r.Method, r.uri, a.Status, a.Body, r.status)
		}
	}
	for _, r := range proxy.Routes() {
		if strings.Contains(r.Path, "{code}") && !covered[r] {
			t.Errorf("%s %s names a voucher but this test does not send it a code in lower case", r.Method, r.Path)
		}
	}
	if st, body := b.Do(t, "GET", "/admin/vouchers/MIXED", nil); st != 200 || !strings.Contains(string(body), `"REFUNDED":1`) {
		t.Errorf("the voucher after the edge's routes: %d %s", st, body)
	}
	sellOut(t, b, e, "LOWSOLD", 1)
	e.reserve(t, "LOWSOLD", "late", "late-0")
	testkit.Eventually(t, "the edge holds the sell-out", func() bool { return e.knows("LOWSOLD") })
	before := testkit.ScrapeMetrics(t, "http://"+e.Ops+"/metrics").Value(t, "vg_edge_soldout_answers_total")
	for _, code := range []string{"lowsold", "LowSold"} {
		if a := e.reserve(t, code, "c", "new-"+code); a.Status != 409 || a.Body != `{"error":"OUT_OF_STOCK"}` {
			t.Errorf("a new order of sold-out %s: %d %s", code, a.Status, a.Body)
		}
	}
	if n := testkit.ScrapeMetrics(t, "http://"+e.Ops+"/metrics").Value(t, "vg_edge_soldout_answers_total") - before; n != 2 {
		t.Errorf("%v of 2 answered from memory", n)
	}
}

// With shoppers' tokens on, a shopper refunds its own confirmed order through the edge, and
// another shopper's refund of it is answered as one of an order nobody reserved.
func TestShopperRefundsThroughTheEdge(t *testing.T) {
	bcfg := backendtest.Config(t)
	bcfg.APIKeysFile = filepath.Join(t.TempDir(), "keys.yaml")
	const edgeKey = "edge-key-0123456789abcdef0123456789abcdef"
	backendtest.WriteKeys(t, bcfg.APIKeysFile,
		backendtest.APIKey{Name: "edge", Secret: edgeKey, Scopes: []string{"reserve", "quota", "read", "edge"}})
	b := backendtest.Start(t, bcfg)
	b.CreateVoucher(t, backendtest.Voucher{Code: "SHOPREF", Discount: 100, TotalLimit: 10, FlashSale: true})
	iss := testkit.NewTokenIssuer(t)
	cfg := edgeConfig(bcfg.NATSURL, bcfg.NATSPrefix, b.Addr)
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	writeFile(t, jwks, iss.JWKS(true))
	cfg.JWTJWKSFile, cfg.JWTAlgs, cfg.JWTAudience, cfg.JWTIssuer, cfg.JWTLeeway = jwks, []string{"RS256"}, iss.Audience, iss.Issuer, 30*time.Second
	cfg.APIKey = edgeKey
	e := startEdge(t, cfg)
	s77, s78 := iss.Sign(t, "RS256", iss.Claims("77")), iss.Sign(t, "RS256", iss.Claims("78"))
	base := "/vouchers/shopref/reservations"
	if st, body := shopperDo(t, e.Addr, "POST", base, `{"customerId":77,"orderId":"o-1","orderAmount":500}`, s77); st != 201 {
		t.Fatalf("77 reserving: %d %s", st, body)
	}
	if st, body := shopperDo(t, e.Addr, "POST", base+"/o-1/confirm", "", s77); st != 200 {
		t.Fatalf("77 confirming: %d %s", st, body)
	}
	if st, body := shopperDo(t, e.Addr, "POST", base+"/o-1/refund", "", ""); st != 401 {
		t.Errorf("a refund without a token: %d %s; want 401", st, body)
	}
	st, body := shopperDo(t, e.Addr, "POST", base+"/o-1/refund", "", s78)
	nst, nbody := shopperDo(t, e.Addr, "POST", base+"/o-none/refund", "", s78)
	if st != 404 || st != nst || body != nbody {
		t.Errorf("78 refunding 77's order: %d %s; an order nobody reserved: %d %s", st, body, nst, nbody)
	}
	for range 2 {
		if st, body := shopperDo(t, e.Addr, "POST", base+"/o-1/refund", "", s77); st != 200 || body != `{"orderId":"o-1","status":"REFUNDED"}` {
			t.Errorf("77 refunding its order: %d %s", st, body)
		}
	}
	var v wire.VoucherView
	_, raw := b.Do(t, "GET", "/admin/vouchers/SHOPREF", nil)
	if json.Unmarshal(raw, &v) != nil || v.UsedCount != 0 || v.Counts[wire.StatusRefunded] != 1 || v.RedisRemaining == nil || *v.RedisRemaining != 10 {
		t.Errorf("after the refund: %s; want the use back, once", raw)
	}
	b.CheckInvariants(t, "SHOPREF", nil)
}
