package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"vouchergate/loadtest/sale"
)

// Exit statuses of `loadtest sale`.
const (
	exitPass  = 0 // the verdict passed
	exitFail  = 1 // the verdict failed
	exitUsage = 2 // bad flags, or the sale could not be set up or run
)

// saleFlags are the flags of `loadtest sale`, also taken by `loadtest salebench`.
func saleFlags(fs *flag.FlagSet) *sale.Settings {
	s := &sale.Settings{}
	fs.StringVar(&s.Target, "target", "http://127.0.0.1:8080", "where reservations go: an edge or a backend")
	fs.StringVar(&s.Admin, "admin", "", "a backend's admin API (default: the target)")
	fs.StringVar(&s.Token, "token", os.Getenv("VG_ADMIN_TOKEN"), "the admin token (default $VG_ADMIN_TOKEN)")
	fs.StringVar(&s.Code, "code", "", "the voucher to sell")
	fs.BoolVar(&s.Create, "create", false, "first create --code as a flash voucher opening now; fail if it exists")
	fs.IntVar(&s.Uses, "uses", 1000, "with --create: the voucher's total limit")
	fs.IntVar(&s.PerCustomer, "per-customer", 1, "with --create: uses per customer")
	fs.Int64Var(&s.Discount, "discount", 100, "with --create: the discount")
	fs.Int64Var(&s.OrderAmount, "order-amount", 150000, "every order's amount")
	fs.Float64Var(&s.Rate, "rate", 1000, "reservations offered per second, open loop")
	fs.DurationVar(&s.Duration, "duration", 10*time.Second, "how long to offer them")
	fs.IntVar(&s.Requests, "requests", 0, "how many to offer (instead of --duration)")
	fs.IntVar(&s.Connections, "connections", 256, "bound on connections to the target")
	fs.IntVar(&s.Customers, "customers", 10_000_000, "customers are drawn from 1..N (numeric ids)")
	fs.Float64Var(&s.RetryShare, "retry-share", 0.1, "share of requests that resend an earlier orderId of the same customer")
	fs.Float64Var(&s.SecondOrderShare, "second-order-share", 0.05, "share of new orders placed by a customer who ordered before")
	fs.Float64Var(&s.ConfirmShare, "confirm-share", 0.5, "share of winners that confirm after the sale")
	fs.Float64Var(&s.ReleaseShare, "release-share", 0.1, "share of winners that release after the sale")
	fs.BoolVar(&s.Tolerate503, "tolerate-503", false, "count 503 answers as allowed, not as errors")
	fs.DurationVar(&s.Timeout, "timeout", 10*time.Second, "bound on one request")
	fs.Uint64Var(&s.Seed, "seed", 0, "the traffic's random seed: the same seed and flags send the same requests (0: one from the clock, printed in the summary)")
	fs.DurationVar(&s.MaxP99, "max-p99", 0, "a latency goal the verdict holds: the reservations' p99 at most this, e.g. 100ms (0: none)")
	return s
}

// outputs are where `loadtest sale` writes besides the terminal.
type outputs struct {
	json, report string
	progress     bool
}

func outputFlags(fs *flag.FlagSet) *outputs {
	o := &outputs{}
	fs.StringVar(&o.json, "json", "", "write the summary and verdict as JSON to this file")
	fs.StringVar(&o.report, "report", "", "write an HTML report (one self-contained file) to this file")
	fs.BoolVar(&o.progress, "progress", isTerminal(os.Stderr), "progress on stderr once a second (default: when stderr is a terminal)")
	return o
}

// runSale is `loadtest sale`; it returns the exit status.
func runSale(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("sale", flag.ContinueOnError)
	s := saleFlags(fs)
	out := outputFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitPass
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "loadtest sale: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	if s.Admin == "" {
		s.Admin = s.Target
	}
	var progressTo io.Writer
	if out.progress {
		progressTo = os.Stderr
	}
	sum, err := rehearse(ctx, *s, *out, progressTo, os.Stdout)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "loadtest sale:", err)
		return exitUsage
	case !sum.Verdict.Pass:
		return exitFail
	}
	return exitPass
}

// rehearse runs one sale, prints its summary to w and writes the files out asks for.
func rehearse(ctx context.Context, s sale.Settings, out outputs, progressTo, w io.Writer) (sale.Summary, error) {
	h, err := sale.Run(ctx, s, progressTo)
	if err != nil {
		return sale.Summary{}, err
	}
	sum := sale.Summarize(h, sale.Judge(h))
	sum.Print(w)
	if out.json != "" {
		b, _ := json.MarshalIndent(sum, "", "  ")
		if err := os.WriteFile(out.json, append(b, '\n'), 0o644); err != nil {
			return sum, fmt.Errorf("write the summary: %w", err)
		}
	}
	if out.report != "" {
		f, err := os.Create(out.report)
		if err != nil {
			return sum, fmt.Errorf("write the report: %w", err)
		}
		err = sale.WriteReport(f, h, sum)
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write the report: %w", cerr)
		}
		if err != nil {
			return sum, err
		}
		fmt.Fprintln(w, "report:", out.report)
	}
	return sum, nil
}

// isTerminal reports whether f is a character device, as a terminal is.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
