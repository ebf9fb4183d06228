package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"vouchergate/loadtest/flashbench"
)

// systemFlags are the flags of the subcommands that start a backend.
func systemFlags(fs *flag.FlagSet) (*flashbench.Servers, *string, *settingsFlag) {
	srv := flashbench.DefaultServers
	fs.StringVar(&srv.PostgresURL, "postgres", srv.PostgresURL, "PostgreSQL to create the run's databases on")
	fs.StringVar(&srv.RedisURL, "redis", srv.RedisURL, "Redis for the backend (keys under a prefix of the run's)")
	fs.StringVar(&srv.NATSURL, "nats", srv.NATSURL, "NATS for the backend (subjects under a prefix of the run's)")
	binary := fs.String("backend", "", "a built backend command; empty: go build ./backend into a temporary folder")
	var env settingsFlag
	fs.Var(&env, "backend-env", "a setting VG_NAME=value (or GOGC=…) for the backend; repeat for more")
	return &srv, binary, &env
}

// machine says how busy the machine was, which moves the figures more than the code does.
func machine(before string, began time.Time) {
	fmt.Printf("machine load average (1 min) before and after: %s, %s on %d CPUs; the run took %v\n",
		before, loadAverage(), runtime.NumCPU(), time.Since(began).Round(time.Second))
}

// roundFlags are the flags of the closed-loop comparisons (allwin, refusals).
func roundFlags(fs *flag.FlagSet, r *flashbench.Loop) {
	fs.IntVar(&r.Rounds, "rounds", 5, "rounds per side, alternating")
	fs.DurationVar(&r.Duration, "duration", 3*time.Second, "measured time per round and side (whole seconds)")
	fs.DurationVar(&r.Warmup, "warmup", 500*time.Millisecond, "unmeasured start of each backend round")
	fs.IntVar(&r.Conns, "conns", 50, "connections to the backend, one request in flight on each")
}

func runAllWin(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("allwin", flag.ExitOnError)
	srv, binary, env := systemFlags(fs)
	s := flashbench.AllWinSettings{}
	roundFlags(fs, &s.Loop)
	fs.IntVar(&s.PgClients, "pgclients", 32, "pgbench clients (-c)")
	fs.IntVar(&s.PgThreads, "pgthreads", 2, "pgbench threads (-j)")
	_ = fs.Parse(args)
	return withBackend(ctx, *srv, *binary, *env, func(b *flashbench.Backend) (printer, error) {
		s1, err := flashbench.StartSolution1(ctx, *srv, s.PgClients, s.PgThreads)
		if err != nil {
			return nil, err
		}
		defer s1.Close()
		return flashbench.RunAllWin(ctx, b, s1, s)
	})
}

func runRefusals(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("refusals", flag.ExitOnError)
	srv, binary, env := systemFlags(fs)
	s := flashbench.RefusalSettings{}
	roundFlags(fs, &s.Loop)
	_ = fs.Parse(args)
	return withBackend(ctx, *srv, *binary, *env, func(b *flashbench.Backend) (printer, error) {
		return flashbench.RunRefusals(ctx, b, s)
	})
}

func runSellout(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sellout", flag.ExitOnError)
	srv, binary, env := systemFlags(fs)
	s := flashbench.SaleSettings{}
	fs.IntVar(&s.Rounds, "rounds", 3, "sales of each kind, each on a new voucher")
	fs.IntVar(&s.Uses, "uses", 10000, "each voucher's total limit (1 per customer)")
	fs.IntVar(&s.Conns, "conns", 200, "concurrent clients")
	fs.DurationVar(&s.Tail, "tail", time.Second, "how long the clients go on after the sell-out")
	fs.DurationVar(&s.Limit, "limit", 20*time.Second, "bound on one sale")
	fs.BoolVar(&s.Baseline, "baseline", true, "run the same sale on a normal (flashSale=false) voucher beside each flash sale")
	_ = fs.Parse(args)
	return withBackend(ctx, *srv, *binary, *env, func(b *flashbench.Backend) (printer, error) {
		return flashbench.RunSales(ctx, b, s)
	})
}

// printer is a benchmark's report.
type printer interface{ Print(w io.Writer) }

// withBackend starts the backend command for a benchmark, runs it, prints its report with the
// backend's warnings and the machine's load, and stops the backend. On a failure it shows the
// end of the backend's output.
func withBackend(ctx context.Context, srv flashbench.Servers, binary string, env []string, run func(*flashbench.Backend) (printer, error)) error {
	before, began := loadAverage(), time.Now()
	b, err := flashbench.StartBackend(ctx, srv, binary, env...)
	if err != nil {
		return err
	}
	defer b.Close()
	r, err := run(b)
	if err != nil {
		fmt.Fprintf(os.Stderr, "backend output:\n%s\n", b.LogTail(3000))
		return err
	}
	r.Print(os.Stdout)
	fmt.Println(b.LogSummary())
	machine(before, began)
	return nil
}
