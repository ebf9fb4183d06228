// Command loadtest loads a server on this machine with flash-sale reservations.
//
//	go run ./loadtest compare [flags]        the edge's sold-out answer against a bare fasthttp server
//	                                         (-passthrough: a checkout path through the edge against the API itself)
//	go run ./loadtest flash -target ADDR ... reservations of new orders at an edge or backend on 127.0.0.1
//	go run ./loadtest allwin [flags]         flash reservations that all win vs Solution 1, the PostgreSQL-only baseline (pgbench)
//	go run ./loadtest refusals [flags]       reservations refused at a sold-out flash voucher's gate vs all-win ones
//	go run ./loadtest sellout [flags]        10,000-use flash sales of 200 concurrent new customers
//	go run ./loadtest sale -code CODE [flags] rehearse a flash sale, open loop, with a verdict and a report
//	go run ./loadtest salebench [flags]      the same sale through an edge and a backend it starts itself
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"time"

	"vouchergate/loadtest/compare"
	"vouchergate/loadtest/load"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "compare":
		err = runCompare(ctx, os.Args[2:])
	case "flash":
		err = runFlash(ctx, os.Args[2:])
	case "allwin":
		err = runAllWin(ctx, os.Args[2:])
	case "refusals":
		err = runRefusals(ctx, os.Args[2:])
	case "sellout":
		err = runSellout(ctx, os.Args[2:])
	case "sale":
		code := runSale(ctx, os.Args[2:])
		stop()
		os.Exit(code)
	case "salebench":
		err = runSaleBench(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: loadtest compare [-rounds N -duration D -warmup D -conns N -baseline R -tolerance T -passthrough] [-serve]
       loadtest flash -target 127.0.0.1:PORT -code CODE [-duration D -conns N]
       loadtest allwin [-rounds N -duration D -warmup D -conns N -pgclients N -pgthreads N -backend PATH]
       loadtest refusals [-rounds N -duration D -warmup D -conns N -backend PATH]
       loadtest sellout [-rounds N -uses N -conns N -tail D -limit D -baseline=BOOL -backend PATH]
       loadtest sale -code CODE [-target URL -admin URL -token T -create -uses N -per-customer K -rate R
                     -duration D | -requests N -connections C -retry-share S ... -seed N -max-p99 D -json FILE -report FILE.html]
                     (loadtest sale -h lists every flag; exit 0: verdict passed, 1: failed, 2: could not run)
       loadtest salebench [-rounds N] [sale flags]  boots a backend and an edge, then runs the sale through the edge`)
	os.Exit(2)
}

func loadFlags(fs *flag.FlagSet) *load.Settings {
	s := &load.Settings{}
	fs.IntVar(&s.Conns, "conns", 64, "connections, one request in flight on each")
	fs.DurationVar(&s.Duration, "duration", 5*time.Second, "measured time per run")
	fs.DurationVar(&s.Warmup, "warmup", time.Second, "unmeasured time before each run")
	return s
}

func runCompare(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("compare", flag.ExitOnError)
	s := loadFlags(fs)
	rounds := fs.Int("rounds", 9, "rounds per server, alternating")
	baseline := fs.Float64("baseline", 0, "an earlier build's edge/bare ratio to hold this one to (0: none)")
	tolerance := fs.Float64("tolerance", 0.05, "how far from -baseline the ratio may be and count as unchanged")
	passThrough := fs.Bool("passthrough", false, "a checkout path through the edge against the same checkout API asked directly")
	serve := fs.Bool("serve", false, "only start the two servers, print their addresses and serve until Ctrl-C, for another load generator (loadtest/compare/wrk.lua)")
	_ = fs.Parse(args)
	if *serve {
		return serveCompared(ctx, *passThrough)
	}
	before := loadAverage()
	run := compare.Run
	if *passThrough {
		run = compare.RunPassThrough
	}
	r, err := run(ctx, *rounds, *s)
	if err != nil {
		return err
	}
	r.Print(os.Stdout)
	if *baseline > 0 {
		r.PrintAgainst(os.Stdout, *baseline, *tolerance)
	}
	fmt.Printf("machine load average (1 min) before and after: %s, %s on %d CPUs\n", before, loadAverage(), runtime.NumCPU())
	return nil
}

// serveCompared runs the two servers of a comparison until ctx ends.
func serveCompared(ctx context.Context, passThrough bool) error {
	ref, edge, stop, err := compare.Serve(ctx, passThrough)
	if err != nil {
		return err
	}
	defer stop()
	refName, path := "bare", "/vouchers/"+compare.Code+"/reservations"
	if passThrough {
		refName, path = "direct", compare.CheckoutPath
	}
	fmt.Printf("%s http://%s%s\nedge http://%s%s\n", refName, ref, path, edge, path)
	fmt.Println("serving until Ctrl-C; e.g. wrk -t1 -c8 -d10s -s loadtest/compare/wrk.lua <URL>")
	<-ctx.Done()
	return nil
}

// loadAverage is the one-minute load average, which says how much else ran meanwhile.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "unknown"
	}
	return f[0]
}

func runFlash(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("flash", flag.ExitOnError)
	s := loadFlags(fs)
	target := fs.String("target", "127.0.0.1:8081", "the edge or backend, on 127.0.0.1")
	fs.StringVar(&s.Code, "code", "FLASH100", "voucher code")
	fs.StringVar(&s.Prefix, "orders", fmt.Sprintf("lt%d-", time.Now().Unix()), "orderId prefix")
	_ = fs.Parse(args)
	r, err := load.Run(ctx, *target, *s)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d requests in %v: %.0f req/s, p50 %v, p99 %v, max %v, %d failed connections\n",
		*target, r.Requests, r.Elapsed, r.RPS(), r.Latency.Quantile(0.5), r.Latency.Quantile(0.99), r.Latency.Max(), r.Errors)
	statuses := make([]int, 0, len(r.Statuses))
	for st := range r.Statuses {
		statuses = append(statuses, st)
	}
	sort.Ints(statuses)
	for _, st := range statuses {
		fmt.Printf("  %d: %d\n", st, r.Statuses[st])
	}
	return nil
}
