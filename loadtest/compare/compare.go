// Package compare measures, in one run, the edge's sold-out answer against a bare fasthttp
// server that answers the same fixed 409 body, with the same load generator and settings.
// Rounds alternate between the two servers, taking turns going first, so that the other load
// on this shared machine falls on both alike; the report takes medians.
package compare

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/edge/app"
	"vouchergate/loadtest/load"
	"vouchergate/shared/config"
	"vouchergate/shared/events"
)

// Code is the voucher the load asks for, sold out on the edge.
const Code = "FLASH100"

// Holders is how many granted orders the sold-out voucher's holder filter holds.
const Holders = 1000

var soldOutBody = []byte(`{"error":"OUT_OF_STOCK"}`)

// StartBare starts a fasthttp server that answers every request with the fixed 409.
func StartBare() (addr string, stop func(), err error) {
	return serveFixed(fasthttp.StatusConflict, soldOutBody)
}

// serveFixed starts a fasthttp server that answers every request status with a JSON body.
func serveFixed(status int, body []byte) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	s := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetStatusCode(status)
			ctx.SetContentType("application/json")
			ctx.SetBody(body)
		},
		NoDefaultServerHeader: true,
	}
	go s.Serve(ln) //nolint:errcheck
	return ln.Addr().String(), func() { _ = s.Shutdown() }, nil
}

// EdgeConfig is the edge's default configuration (its caps on connections and bodies included),
// except that no backend or NATS is reachable, there is no ops listener and the sold-out entry
// does not expire during the run: only the sold-out answer is measured.
func EdgeConfig() config.Edge {
	c := config.EdgeDefaults()
	c.Addr, c.Backends, c.OpsAddr = "127.0.0.1:0", []string{"127.0.0.1:1"}, config.OpsOff
	c.NATSURL, c.NATSPrefix = "nats://127.0.0.1:1", "vgbench"
	c.SoldOutTTL, c.SoldOutRefresh, c.SyncWait, c.ShutdownGrace = time.Hour, 0, 0, time.Second
	return c
}

// StartEdge starts the edge (edge/app) with Code sold out and Holders granted orders.
func StartEdge(ctx context.Context) (addr string, stop func(), err error) {
	ids := make([]string, Holders)
	for i := range ids {
		ids[i] = fmt.Sprintf("granted-%d", i)
	}
	state := events.VoucherState{Code: Code, SoldOut: true, At: time.Now().UTC(), Holders: events.NewHolderFilter(ids)}
	return serveEdge(ctx, EdgeConfig(), func(a *app.App) error { return a.Cache.Apply(state) })
}

// serveEdge starts the edge with cfg, prepared by prepare, on a free 127.0.0.1 port.
func serveEdge(ctx context.Context, cfg config.Edge, prepare func(*app.App) error) (addr string, stop func(), err error) {
	a, err := app.New(ctx, cfg, app.WithLog(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return "", nil, err
	}
	if err := prepare(a); err != nil {
		_ = a.Close()
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = a.Close()
		return "", nil, err
	}
	go a.Serve(ln) //nolint:errcheck
	return ln.Addr().String(), func() { _ = a.Close() }, nil
}

// Report holds every round's results: Bare are the reference server's (the bare fasthttp
// server, or the checkout API asked directly), Edge the edge's.
type Report struct {
	Settings    load.Settings
	Bare        []load.Result
	Edge        []load.Result
	passThrough bool // a checkout path through the edge against the checkout API itself
}

// Run starts both servers and loads each Rounds times, alternating.
func Run(ctx context.Context, rounds int, s load.Settings) (Report, error) {
	s.Code, s.Prefix = Code, "late-"
	bare, stopBare, err := StartBare()
	if err != nil {
		return Report{}, fmt.Errorf("start bare server: %w", err)
	}
	defer stopBare()
	edge, stopEdge, err := StartEdge(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("start edge: %w", err)
	}
	defer stopEdge()

	r := Report{Settings: s}
	// The edge forwards the new orders its holder filter takes for holders (0.1% false
	// positives); with no backend behind it, they get a quick 503.
	err = r.alternate(ctx, rounds, bare, edge, func(addr string, res load.Result) error {
		other := res.Requests - res.Statuses[fasthttp.StatusConflict]
		if res.Errors > 0 || other*1000 > res.Requests*5 || (addr == bare && other > 0) {
			return fmt.Errorf("%s answered %v, %d failed connections; want (almost) all 409", addr, res.Statuses, res.Errors)
		}
		return nil
	})
	return r, err
}

// alternate loads the reference server and the edge rounds times each, taking turns going
// first so that a trend in the machine's other load is shared, and keeps each round's result
// that check accepts.
func (r *Report) alternate(ctx context.Context, rounds int, ref, edge string, check func(addr string, res load.Result) error) error {
	type server struct {
		addr string
		into *[]load.Result
	}
	for i := range rounds {
		order := []server{{ref, &r.Bare}, {edge, &r.Edge}}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, t := range order {
			res, err := load.Run(ctx, t.addr, r.Settings)
			if err != nil {
				return err
			}
			if err := check(t.addr, res); err != nil {
				return err
			}
			*t.into = append(*t.into, res)
		}
	}
	return nil
}

// Summary is the median of each figure over the rounds.
type Summary struct {
	RPS           float64
	P50, P99, Max time.Duration
}

func summarize(rs []load.Result) Summary {
	var rps []float64
	var p50, p99, mx []time.Duration
	for _, r := range rs {
		rps = append(rps, r.RPS())
		p50 = append(p50, r.Latency.Quantile(0.50))
		p99 = append(p99, r.Latency.Quantile(0.99))
		mx = append(mx, r.Latency.Max())
	}
	return Summary{RPS: load.Median(rps), P50: load.Median(p50), P99: load.Median(p99), Max: load.Median(mx)}
}

// BareSummary and EdgeSummary are the medians of each server's rounds.
func (r Report) BareSummary() Summary { return summarize(r.Bare) }
func (r Report) EdgeSummary() Summary { return summarize(r.Edge) }

// Ratio is the edge's median requests per second over the bare server's.
func (r Report) Ratio() float64 {
	b := r.BareSummary().RPS
	if b == 0 {
		return 0
	}
	return r.EdgeSummary().RPS / b
}

// Print writes each round and the medians.
func (r Report) Print(w io.Writer) {
	if r.passThrough {
		r.printPassThrough(w)
		return
	}
	s := r.Settings
	fmt.Fprintf(w, "load: %d connections, %v warm-up + %v per round, %d rounds, POST /vouchers/%s/reservations with new orderIds\n",
		s.Conns, s.Warmup, s.Duration, len(r.Bare), s.Code)
	r.printRounds(w, "bare", "edge")
	b, e := r.BareSummary(), r.EdgeSummary()
	fmt.Fprintf(w, "median bare: %.0f req/s, p50 %v, p99 %v\n", b.RPS, b.P50.Round(time.Microsecond), b.P99.Round(time.Microsecond))
	fmt.Fprintf(w, "median edge: %.0f req/s, p50 %v, p99 %v (%d of %d new orders forwarded as possible holders)\n",
		e.RPS, e.P50.Round(time.Microsecond), e.P99.Round(time.Microsecond), r.forwarded(), r.edgeRequests())
	verdict := "goal met"
	if r.Ratio() < goalRatio || e.P99 >= goalP99 {
		verdict = "goal NOT met"
	}
	fmt.Fprintf(w, "ratio edge/bare: %.2f (goal >= %.2f with edge p99 < %v: %s)\n", r.Ratio(), goalRatio, goalP99, verdict)
}

// The sold-out answer's goal: at least 0.85 of a bare fasthttp server's rate answering the same
// 409, with the edge's p99 under 5 ms.
const (
	goalRatio = 0.85
	goalP99   = 5 * time.Millisecond
)

// printRounds writes each round's figures, the reference server's under ref.
func (r Report) printRounds(w io.Writer, ref, edge string) {
	fmt.Fprintf(w, "%-6s %-8s %12s %10s %10s %10s\n", "round", "server", "req/s", "p50", "p99", "max")
	for i := range r.Bare {
		for _, x := range []struct {
			name string
			res  load.Result
		}{{ref, r.Bare[i]}, {edge, r.Edge[i]}} {
			fmt.Fprintf(w, "%-6d %-8s %12.0f %10v %10v %10v\n", i+1, x.name, x.res.RPS(),
				x.res.Latency.Quantile(0.5).Round(time.Microsecond), x.res.Latency.Quantile(0.99).Round(time.Microsecond),
				x.res.Latency.Max().Round(time.Microsecond))
		}
	}
}

// PrintAgainst writes whether the ratio is within tolerance of baseline, an earlier build's
// ratio measured the same way: the two servers in one run make the ratio, unlike either rate,
// comparable between runs on a machine whose other load comes and goes.
func (r Report) PrintAgainst(w io.Writer, baseline, tolerance float64) {
	verdict := "unchanged within noise"
	switch d := r.Ratio() - baseline; {
	case d < -tolerance:
		verdict = "SLOWER than the baseline"
	case d > tolerance:
		verdict = "faster than the baseline"
	}
	fmt.Fprintf(w, "ratio against the baseline %.3f (tolerance %.2f): %.3f, %s\n", baseline, tolerance, r.Ratio(), verdict)
}

func (r Report) edgeRequests() (n int64) {
	for _, res := range r.Edge {
		n += res.Requests
	}
	return n
}

func (r Report) forwarded() (n int64) {
	for _, res := range r.Edge {
		n += res.Requests - res.Statuses[fasthttp.StatusConflict]
	}
	return n
}
