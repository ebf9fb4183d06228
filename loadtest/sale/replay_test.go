package sale_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/backendtest"
	"vouchergate/loadtest/sale"
)

// recorder is a target that writes down every request it is sent, in the order they come, and
// answers as a voucher of recorderUses uses would: the first orders it sees are granted (201,
// and 201 again when sent again), the rest refused 409 OUT_OF_STOCK, and every confirm and
// release 200. Its answers depend on nothing but the requests and their order, so the same
// requests get the same answers, and with them the same winners to confirm, release and re-send.
type recorder struct {
	addr     string
	mu       sync.Mutex
	requests []string
	granted  map[string]bool // orderIds
}

// recorderUses is how many orders a recorder grants.
const recorderUses = 30

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: ln.Addr().String(), granted: map[string]bool{}}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/healthz" {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.requests = append(r.requests, fmt.Sprintf("%s %s %s", ctx.Method(), ctx.RequestURI(), ctx.PostBody()))
		var order struct{ OrderID string }
		switch {
		case !strings.HasSuffix(string(ctx.Path()), "/reservations"): // a confirm or a release
			ctx.SetBodyString(`{}`)
		case json.Unmarshal(ctx.PostBody(), &order) == nil && (r.granted[order.OrderID] || len(r.granted) < recorderUses):
			r.granted[order.OrderID] = true
			ctx.SetStatusCode(201)
			ctx.SetBodyString(`{"orderId":"` + order.OrderID + `","discountAmount":10}`)
		default:
			ctx.SetStatusCode(409)
			ctx.SetBodyString(`{"error":"OUT_OF_STOCK","message":"sold out"}`)
		}
	}}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { _ = srv.Shutdown() })
	return r
}

// take returns the requests recorded so far and forgets them and the orders it granted.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.requests
	r.requests, r.granted = nil, map[string]bool{}
	return out
}

// Two runs with one seed send the same requests: the same customers, orderIds and retries, in
// the same order (one connection keeps the order), then the same winners' confirms, releases
// and re-sends; another seed sends others. The voucher is a real backend's, read through its
// admin API; the requests go to a recorder.
func TestASeedReplaysTheSameTraffic(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	b.CreateVoucher(t, backendtest.Voucher{Code: "REPLAY", Discount: 10, TotalLimit: 50, FlashSale: true})
	rec := startRecorder(t)
	run := func(seed uint64) []string {
		t.Helper()
		s := sale.Settings{Target: "http://" + rec.addr, Admin: b.URL, Token: backendtest.Token, Code: "REPLAY",
			OrderAmount: 1000, Rate: 5000, Requests: 400, Connections: 1, Timeout: 10 * time.Second, Seed: seed,
			Traffic: sale.Traffic{Customers: 100, RetryShare: 0.2, SecondOrderShare: 0.1, ConfirmShare: 0.5, ReleaseShare: 0.1}}
		h, err := sale.Run(context.Background(), s, nil)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sale.Summarize(h, sale.Judge(h)); sum.Settings.Seed != seed || sum.Sent != 400 {
			t.Fatalf("seed %d: the summary records seed %d, %d sent", seed, sum.Settings.Seed, sum.Sent)
		}
		return rec.take()
	}
	first, again, other := run(7), run(7), run(8)
	confirms, releases := 0, 0
	for _, r := range first[min(400, len(first)):] {
		switch {
		case strings.HasPrefix(r, "POST ") && strings.Contains(r, "/confirm "):
			confirms++
		case strings.HasPrefix(r, "DELETE "):
			releases++
		}
	}
	// 400 reservations, then the winners' follow-ups, then a re-send of each winner
	if want := 400 + confirms + releases + recorderUses; len(first) != want || confirms == 0 || releases == 0 {
		t.Fatalf("the recorder got %d requests, %d confirms and %d releases after the sale; want %d, some of each", len(first), confirms, releases, want)
	}
	if !slices.Equal(first, again) {
		for i := range min(len(first), len(again)) {
			if first[i] != again[i] {
				t.Fatalf("seed 7 twice: request %d differs:\n%s\n%s", i, first[i], again[i])
			}
		}
		t.Fatalf("seed 7 twice: %d and %d requests", len(first), len(again))
	}
	if slices.Equal(first, other) {
		t.Error("seeds 7 and 8 sent the same requests")
	}
}
