package compare

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/edge/app"
	"vouchergate/loadtest/load"
)

// The pass-through: a checkout path through the edge against the same checkout API asked
// directly, in one run, rounds alternating as for the sold-out answer. The ratio is what a hop
// through the edge costs a shop's own traffic on this machine.

// CheckoutPath is the checkout API path the pass-through load posts to.
const CheckoutPath = "/cart/items"

var cartBody = []byte(`{"items":[{"sku":"1001","qty":1}],"total":150000}`)

// StartCheckout starts a stand-in checkout API: a fasthttp server answering every request 200
// with a small JSON body.
func StartCheckout() (addr string, stop func(), err error) {
	return serveFixed(fasthttp.StatusOK, cartBody)
}

// StartPassThroughEdge starts the edge (edge/app) with its defaults and the checkout API at
// checkout.
func StartPassThroughEdge(ctx context.Context, checkout string) (addr string, stop func(), err error) {
	cfg := EdgeConfig()
	cfg.Upstream = checkout
	return serveEdge(ctx, cfg, func(*app.App) error { return nil })
}

// RunPassThrough starts the checkout API and an edge in front of it, and loads CheckoutPath on
// each Rounds times, alternating.
func RunPassThrough(ctx context.Context, rounds int, s load.Settings) (Report, error) {
	s.Path, s.Prefix = CheckoutPath, "cart-"
	checkout, stopCheckout, err := StartCheckout()
	if err != nil {
		return Report{}, fmt.Errorf("start checkout API: %w", err)
	}
	defer stopCheckout()
	edge, stopEdge, err := StartPassThroughEdge(ctx, checkout)
	if err != nil {
		return Report{}, fmt.Errorf("start edge: %w", err)
	}
	defer stopEdge()
	r := Report{Settings: s, passThrough: true}
	err = r.alternate(ctx, rounds, checkout, edge, func(addr string, res load.Result) error {
		if res.Errors > 0 || res.Statuses[fasthttp.StatusOK] != res.Requests {
			return fmt.Errorf("%s answered %v, %d failed connections; want all 200", addr, res.Statuses, res.Errors)
		}
		return nil
	})
	return r, err
}

// printPassThrough writes each round, the medians and the ratio.
func (r Report) printPassThrough(w io.Writer) {
	s := r.Settings
	fmt.Fprintf(w, "load: %d connections, %v warm-up + %v per round, %d rounds, POST %s, through the edge and directly\n",
		s.Conns, s.Warmup, s.Duration, len(r.Bare), s.Path)
	r.printRounds(w, "direct", "through")
	d, e := r.BareSummary(), r.EdgeSummary()
	fmt.Fprintf(w, "median direct: %.0f req/s, p50 %v, p99 %v\n", d.RPS, d.P50.Round(time.Microsecond), d.P99.Round(time.Microsecond))
	fmt.Fprintf(w, "median through the edge: %.0f req/s, p50 %v, p99 %v\n", e.RPS, e.P50.Round(time.Microsecond), e.P99.Round(time.Microsecond))
	fmt.Fprintf(w, "ratio through/direct: %.2f\n", r.Ratio())
}

// Serve starts the two servers a comparison loads, the sold-out pair (bare, then the edge) or
// with passThrough the pass-through pair (the checkout API, then the edge in front of it), for
// another load generator to load, and returns their addresses and what stops both.
func Serve(ctx context.Context, passThrough bool) (ref, edge string, stop func(), err error) {
	startRef, startEdge := StartBare, StartEdge
	if passThrough {
		startRef = StartCheckout
	}
	ref, stopRef, err := startRef()
	if err != nil {
		return "", "", nil, err
	}
	if passThrough {
		startEdge = func(ctx context.Context) (string, func(), error) { return StartPassThroughEdge(ctx, ref) }
	}
	edge, stopEdge, err := startEdge(ctx)
	if err != nil {
		stopRef()
		return "", "", nil, err
	}
	return ref, edge, func() { stopEdge(); stopRef() }, nil
}
