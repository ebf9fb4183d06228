package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"vouchergate/loadtest/flashbench"
	"vouchergate/loadtest/load"
	"vouchergate/loadtest/sale"
)

// The goals for a sale through the edge: p99 of every answer under 100 ms, and the voucher sold
// out (its last use's 201) within 150 ms of the first request.
const (
	goalP99     = 100 * time.Millisecond
	goalSoldOut = 150 * time.Millisecond
)

// runSaleBench is `loadtest salebench`: it starts a backend and an edge built from this tree
// on free 127.0.0.1 ports, runs the sale of `loadtest sale` through the edge -rounds times,
// each on a new voucher, and prints each round and the medians. It fails if a verdict fails;
// the latency goal is reported, not enforced.
func runSaleBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("salebench", flag.ExitOnError)
	srv, backendBin, backendEnv := systemFlags(fs)
	edgeBin := fs.String("edge", "", "a built edge command; empty: go build ./edge into a temporary folder")
	var edgeEnv settingsFlag
	fs.Var(&edgeEnv, "edge-env", "a setting VG_NAME=value (or GOGC=…) for the edge; repeat for more")
	s := saleFlags(fs)
	out := outputFlags(fs)
	rounds := fs.Int("rounds", 3, "sales, each on a new voucher")
	starts := fs.Int("starts", 0, "instead: start a backend and an edge this many times, each for a first and a second sale, and compare the two (a sale's opening right after a start)")
	direct := fs.Bool("direct", false, "with -starts: send the reservations to the backend itself, the edge started but not asked")
	fs.Set("requests", "50000")
	fs.Set("rate", "50000")
	fs.Set("create", "true")
	_ = fs.Parse(args)
	if *starts > 0 {
		return firstVersusSecond(ctx, starter{*srv, *backendBin, *backendEnv, *edgeBin, edgeEnv}, *s, *starts, *direct)
	}
	before, began := loadAverage(), time.Now()
	b, e, err := starter{*srv, *backendBin, *backendEnv, *edgeBin, edgeEnv}.start(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	defer e.Close()
	s.Target, s.Admin, s.Token, s.Create = "http://"+e.Addr, "http://"+b.Addr, b.Token, true
	var sums []sale.Summary
	var uses []flashbench.CPUUse
	stamp := time.Now().Unix()
	for i := range *rounds {
		s.Code = fmt.Sprintf("BENCH%d-%d", i+1, stamp)
		o := *out
		o.json, o.report = perRound(o.json, i+1), perRound(o.report, i+1)
		fmt.Printf("--- round %d of %d: %s\n", i+1, *rounds, s.Code)
		var progressTo io.Writer
		if o.progress {
			progressTo = os.Stderr
		}
		var sum sale.Summary
		use, err := flashbench.MeasureCPU(ctx, b, e, func() (err error) {
			sum, err = rehearse(ctx, *s, o, progressTo, os.Stdout)
			return err
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "backend output:\n%s\nedge output:\n%s\n", b.LogTail(2000), e.LogTail(2000))
			return err
		}
		fmt.Printf("CPU from the voucher's creation to its last read (%v, %d requests), per request: %s\n",
			use.Wall.Round(time.Millisecond), sum.Requests, use.String(float64(sum.Requests)/use.Wall.Seconds()))
		sums, uses = append(sums, sum), append(uses, use)
	}
	printSaleMedians(sums, *s)
	fmt.Printf("  cores busy from each voucher's creation to its last read: edge %.2f, backend %.2f, Redis %.2f, PostgreSQL %.2f, generator %.2f, other sessions %.2f; machine %.2f of %d\n",
		cores(uses, func(u flashbench.CPUUse) time.Duration { return u.Edge }),
		cores(uses, func(u flashbench.CPUUse) time.Duration { return u.Backend }),
		cores(uses, func(u flashbench.CPUUse) time.Duration { return u.Redis }),
		cores(uses, func(u flashbench.CPUUse) time.Duration { return u.Postgres }),
		cores(uses, func(u flashbench.CPUUse) time.Duration { return u.Generator }),
		cores(uses, flashbench.CPUUse.Other),
		cores(uses, func(u flashbench.CPUUse) time.Duration { return u.Machine }), runtime.NumCPU())
	fmt.Println(b.LogSummary())
	machine(before, began)
	for i, sum := range sums {
		if !sum.Verdict.Pass {
			return fmt.Errorf("round %d's verdict failed", i+1)
		}
	}
	return nil
}

// perRound inserts -N before name's extension: sale.html becomes sale-2.html.
func perRound(name string, round int) string {
	if name == "" {
		return ""
	}
	ext := filepath.Ext(name)
	return fmt.Sprintf("%s-%d%s", strings.TrimSuffix(name, ext), round, ext)
}

// cores is the median over the rounds of one part's cores.
func cores(uses []flashbench.CPUUse, part func(flashbench.CPUUse) time.Duration) float64 {
	v := make([]float64, len(uses))
	for i, u := range uses {
		v[i] = u.Cores(part(u))
	}
	return load.Median(v)
}

func printSaleMedians(sums []sale.Summary, s sale.Settings) {
	col := func(f func(sale.Summary) float64) float64 {
		v := make([]float64, len(sums))
		for i, x := range sums {
			v[i] = f(x)
		}
		return load.Median(v)
	}
	p99 := col(func(x sale.Summary) float64 { return x.Latency.P99 })
	fmt.Printf("medians of %d sales of %d uses, %d requests offered at %.0f/s through the edge, %.0f%% retries:\n",
		len(sums), s.Uses, s.Count(), s.Rate, 100*s.RetryShare)
	fmt.Printf("  sent at %.0f/s (99%% within %.2f ms of schedule; the generator took %.2f cores), answered at %.0f/s; granted %.0f; sold out at %.0f ms\n",
		col(func(x sale.Summary) float64 { return x.OfferedRate }), col(func(x sale.Summary) float64 { return x.SendLateP99Ms }),
		col(func(x sale.Summary) float64 { return x.GeneratorCores }),
		col(func(x sale.Summary) float64 { return x.AchievedRate }), col(func(x sale.Summary) float64 { return float64(x.Granted) }),
		col(func(x sale.Summary) float64 {
			if x.SoldOutMs == nil {
				return -1
			}
			return *x.SoldOutMs
		}))
	fmt.Printf("  latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms\n",
		col(func(x sale.Summary) float64 { return x.Latency.P50 }), col(func(x sale.Summary) float64 { return x.Latency.P90 }),
		p99, col(func(x sale.Summary) float64 { return x.Latency.P999 }), col(func(x sale.Summary) float64 { return x.Latency.Max }))
	fmt.Printf("  due before the sell-out: p99 %.2f ms; due after it: p99 %.2f ms\n",
		col(func(x sale.Summary) float64 { return x.Before.P99 }), col(func(x sale.Summary) float64 { return x.After.P99 }))
	passed := 0
	for _, x := range sums {
		if x.Verdict.Pass {
			passed++
		}
	}
	soldOut := col(func(x sale.Summary) float64 {
		if x.SoldOutMs == nil {
			return math.Inf(1)
		}
		return *x.SoldOutMs
	})
	fmt.Printf("  verdicts passed: %d of %d; goal p99 < %v: %s (median p99 %.2f ms); goal sold out within %v: %s (median %.0f ms)\n",
		passed, len(sums), goalP99, metOrNot(p99 < float64(goalP99/time.Millisecond)), p99,
		goalSoldOut, metOrNot(soldOut <= float64(goalSoldOut/time.Millisecond)), soldOut)
}

func metOrNot(met bool) string {
	if met {
		return "met"
	}
	return "NOT met"
}

// firstVersusSecond is `loadtest salebench -starts N`: N times, a backend and an edge started
// afresh, then two sales through the edge (with -direct: to the backend itself), each on a new
// voucher; it prints each start's p99 of the answers due before the sell-out (the opening) of
// both sales, and the median ratio of the first to the second: how much slower the first sale
// after a start opens than a warm one (goal: at most 1.5).
func firstVersusSecond(ctx context.Context, st starter, s sale.Settings, starts int, direct bool) error {
	before, began := loadAverage(), time.Now()
	var firsts, seconds, ratios []float64
	stamp := time.Now().Unix()
	for i := range starts {
		b, e, err := st.start(ctx)
		if err != nil {
			return err
		}
		s.Target, s.Admin, s.Token, s.Create = "http://"+e.Addr, "http://"+b.Addr, b.Token, true
		if direct {
			s.Target = "http://" + b.Addr
		}
		var p99 [2]float64
		for j := range 2 {
			s.Code = fmt.Sprintf("FRESH%d-%d-%d", i+1, j+1, stamp)
			connsBefore, err := b.DatabaseConns(ctx)
			var sum sale.Summary
			if err == nil {
				var use flashbench.CPUUse
				use, err = flashbench.MeasureCPU(ctx, b, e, func() (err error) {
					sum, err = rehearse(ctx, s, outputs{}, nil, io.Discard)
					return err
				})
				if err == nil {
					printSaleAfterStart(ctx, j+1, sum, use, b, connsBefore)
				}
			}
			if err != nil {
				e.Close()
				b.Close()
				return err
			}
			if !sum.Verdict.Pass {
				sum.Print(os.Stdout)
				e.Close()
				b.Close()
				return fmt.Errorf("start %d, sale %d: the verdict failed", i+1, j+1)
			}
			p99[j] = sum.Before.P99
		}
		e.Close()
		b.Close()
		ratio := p99[0] / max(p99[1], 0.001)
		fmt.Printf("start %d: first sale's opening p99 %.2f ms, second's %.2f ms: %.2f×\n", i+1, p99[0], p99[1], ratio)
		firsts, seconds, ratios = append(firsts, p99[0]), append(seconds, p99[1]), append(ratios, ratio)
	}
	r := load.Median(ratios)
	met := "met"
	if r > 1.5 {
		met = "NOT met"
	}
	via := "through the edge"
	if direct {
		via = "to the backend"
	}
	fmt.Printf("medians of %d starts (%d uses, %d requests at %.0f/s %s each sale): first sale's opening p99 %.2f ms, second's %.2f ms; first/second %.2f× (goal ≤ 1.5: %s)\n",
		starts, s.Uses, s.Count(), s.Rate, via, load.Median(firsts), load.Median(seconds), r, met)
	machine(before, began)
	return nil
}

// starter starts a benchmark's backend and the edge in front of it.
type starter struct {
	srv        flashbench.Servers
	backendBin string
	backendEnv []string
	edgeBin    string
	edgeEnv    []string
}

// start starts the backend, then the edge; on an error nothing is left running.
func (st starter) start(ctx context.Context) (*flashbench.Backend, *flashbench.Edge, error) {
	b, err := flashbench.StartBackend(ctx, st.srv, st.backendBin, st.backendEnv...)
	if err != nil {
		return nil, nil, err
	}
	e, err := flashbench.StartEdge(ctx, b, st.edgeBin, st.edgeEnv...)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return b, e, nil
}

// printSaleAfterStart shows one sale of `salebench -starts`: its opening's latencies, the CPU
// each process used from the voucher's creation to its last read, and how many connections the
// backend's PostgreSQL pool held before and after (connections dialled during a sale cost
// PostgreSQL a server process each, and their first statements).
func printSaleAfterStart(ctx context.Context, n int, sum sale.Summary, use flashbench.CPUUse, b *flashbench.Backend, connsBefore int) {
	after, err := b.DatabaseConns(ctx)
	if err != nil {
		after = -1
	}
	fmt.Printf("  sale %d: opening p50 %.1f, p90 %.1f, p99 %.1f ms (generator late p99 %.1f ms); PostgreSQL connections %d before, %d after\n",
		n, sum.Before.P50, sum.Before.P90, sum.Before.P99, sum.SendLateP99Ms, connsBefore, after)
	fmt.Printf("  sale %d: CPU over %v (%d requests), per request: %s\n",
		n, use.Wall.Round(time.Millisecond), sum.Requests, use.String(float64(sum.Requests)/use.Wall.Seconds()))
}
