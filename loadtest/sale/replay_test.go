package sale_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/backendtest"
	"vouchergate/loadtest/sale"
)

// recorder is a target that writes down every request it is sent, in the order they come, and
// answers each reservation 409 OUT_OF_STOCK: the wire a sale's traffic goes out on.
type recorder struct {
	addr     string
	mu       sync.Mutex
	requests []string
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: ln.Addr().String()}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/healthz" {
			return
		}
		r.mu.Lock()
		r.requests = append(r.requests, fmt.Sprintf("%s %s %s", ctx.Method(), ctx.RequestURI(), ctx.PostBody()))
		r.mu.Unlock()
		ctx.SetStatusCode(409)
		ctx.SetBodyString(`{"error":"OUT_OF_STOCK","message":"sold out"}`)
	}}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { _ = srv.Shutdown() })
	return r
}

// take returns the requests recorded so far and forgets them.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.requests
	r.requests = nil
	return out
}

// Two runs with one seed send the same requests: the same customers, orderIds and retries, in
// the same order (one connection keeps the order); another seed sends others. The voucher is a
// real backend's, read through its admin API; the reservations go to a recorder.
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
	if len(first) != 400 {
		t.Fatalf("the recorder got %d requests; want 400", len(first))
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
