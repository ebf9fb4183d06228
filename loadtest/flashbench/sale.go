package flashbench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"vouchergate/loadtest/load"
)

// SaleSettings say how to run the sales.
type SaleSettings struct {
	Rounds   int
	Uses     int // each voucher's total limit; one use per customer
	Conns    int // concurrent clients, each a closed loop of new customers
	Tail     time.Duration
	Limit    time.Duration // bound on one sale
	Baseline bool          // also run each round's sale on a normal (flashSale=false) voucher
}

// The goals for a 10,000-use flash sale with 200 buyers: sold out within 700 ms of the first
// request, winners answered within 100 ms at p99.
const (
	goalSoldOut    = 700 * time.Millisecond
	goalWinnersP99 = 100 * time.Millisecond
)

// SaleRound is one sale on a fresh voucher.
type SaleRound struct {
	Code   string
	Flash  bool
	Result load.SaleResult
	State  VoucherState // the voucher after the sale
	CPU    CPUUse
}

// Faults lists what makes the round not a clean sale: more than uses granted, or fewer
// although every client was told OUT_OF_STOCK, an answer other than 201 or 409, or stores
// that disagree with what was answered. A sale that was still selling at its time bound is
// not a fault, only slow (Misses).
func (r SaleRound) Faults(uses int) []string {
	var p []string
	res := r.Result
	if g := res.Granted(); g > int64(uses) || (g < int64(uses) && !res.Limited) {
		p = append(p, fmt.Sprintf("%d granted, not %d", g, uses))
	}
	if other := res.Requests - res.Statuses[201] - res.Statuses[409]; other > 0 || res.Errors > 0 {
		p = append(p, fmt.Sprintf("%d answers other than 201/409 %v, %d failed connections", other, res.Statuses, res.Errors))
	}
	if r.State.UsedCount != int(res.Granted()) || r.State.Counts["RESERVED"] != r.State.UsedCount {
		p = append(p, fmt.Sprintf("the database says used %d, by status %v", r.State.UsedCount, r.State.Counts))
	}
	if r.Flash && (r.State.RedisRemaining == nil || *r.State.RedisRemaining != int64(uses)-res.Granted()) {
		p = append(p, fmt.Sprintf("Redis has %v uses left", r.State.RedisRemaining))
	}
	return p
}

// Misses lists the goals the round missed.
func (r SaleRound) Misses(s SaleSettings) []string {
	var p []string
	res := r.Result
	if res.SoldOut == 0 {
		p = append(p, fmt.Sprintf("not sold out within %v", s.Limit))
	} else if res.SoldOut > goalSoldOut {
		p = append(p, fmt.Sprintf("sold out in %v (goal ≤ %v)", res.SoldOut.Round(time.Millisecond), goalSoldOut))
	}
	if p99 := res.Won.Quantile(0.99); p99 >= goalWinnersP99 {
		p = append(p, fmt.Sprintf("winners' p99 %v (goal < %v)", ms(p99), goalWinnersP99))
	}
	return p
}

// SaleReport holds every round.
type SaleReport struct {
	Settings SaleSettings
	Flash    []SaleRound
	Normal   []SaleRound // the baseline, if run
}

// RunSales runs s.Rounds sales on new flash vouchers, each beside the same sale on a new
// normal voucher if s.Baseline, taking turns going first.
func RunSales(ctx context.Context, b *Backend, s SaleSettings) (SaleReport, error) {
	r := SaleReport{Settings: s}
	meter := cpuMeter{backendPID: b.PID, redis: b.redis}
	sell := func(round int, flash bool) error {
		kind := "N"
		if flash {
			kind = "F"
		}
		code := fmt.Sprintf("SALE%d%s", round+1, kind)
		if err := b.CreateVoucher(ctx, Voucher{Code: code, TotalLimit: s.Uses, PerUserLimit: 1, FlashSale: flash}); err != nil {
			return err
		}
		ls := load.SaleSettings{Conns: s.Conns, Code: code, Prefix: code + "-o", Customers: code + "-c",
			Uses: s.Uses, Tail: s.Tail, Limit: s.Limit}
		start := meter.sample(ctx)
		res, err := load.Sale(ctx, b.Addr, ls)
		use := start.until(meter.sample(ctx))
		if err != nil {
			return fmt.Errorf("sale of %s: %w", code, err)
		}
		state, err := b.Voucher(ctx, code)
		if err != nil {
			return err
		}
		sr := SaleRound{Code: code, Flash: flash, Result: res, State: state, CPU: use}
		if flash {
			r.Flash = append(r.Flash, sr)
		} else {
			r.Normal = append(r.Normal, sr)
		}
		return nil
	}
	for i := range s.Rounds {
		kinds := []bool{true}
		if s.Baseline {
			kinds = []bool{true, false}
			if i%2 == 1 {
				kinds = []bool{false, true}
			}
		}
		for _, flash := range kinds {
			if err := sell(i, flash); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

// saleSummary is the median of each figure over a kind's rounds. A sale that did not sell
// out counts as slower than any that did.
type saleSummary struct {
	soldOut, wonP50, wonP99, duringP99, afterP99 time.Duration
	usesPerSec                                   float64
}

const never = time.Duration(1<<63 - 1)

func summarizeSales(rs []SaleRound) saleSummary {
	return saleSummary{
		soldOut:    median(collect(rs, func(x SaleRound) time.Duration { return soldOutOrNever(x.Result) })),
		wonP50:     median(collect(rs, func(x SaleRound) time.Duration { return x.Result.Won.Quantile(0.5) })),
		wonP99:     median(collect(rs, func(x SaleRound) time.Duration { return x.Result.Won.Quantile(0.99) })),
		duringP99:  median(collect(rs, func(x SaleRound) time.Duration { return x.Result.During.Quantile(0.99) })),
		afterP99:   median(collect(rs, func(x SaleRound) time.Duration { return x.Result.After.Quantile(0.99) })),
		usesPerSec: median(collect(rs, func(x SaleRound) float64 { return usesPerSec(x.Result) })),
	}
}

func soldOutOrNever(r load.SaleResult) time.Duration {
	if r.SoldOut == 0 {
		return never
	}
	return r.SoldOut
}

// usesPerSec is the rate at which uses were granted until the sell-out, or over the whole
// sale if it did not sell out.
func usesPerSec(r load.SaleResult) float64 {
	d := r.SoldOut
	if d == 0 {
		d = r.Elapsed
	}
	if d <= 0 {
		return 0
	}
	return float64(r.Granted()) / d.Seconds()
}

func soldOutText(d time.Duration, limit time.Duration) string {
	if d == never || d == 0 {
		return "not within " + limit.String()
	}
	return d.Round(time.Millisecond).String()
}

func soldOutPhrase(d time.Duration, limit time.Duration) string {
	if d == never || d == 0 {
		return "not sold out within " + limit.String()
	}
	return "sold out in " + d.Round(time.Millisecond).String()
}

// durText is a median latency, or "-" if none was measured.
func durText(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return ms(d).String()
}

// latencyText is a latency, or "-" for none measured.
func latencyText(h *load.Histogram, q float64) string {
	if h.Count() == 0 {
		return "-"
	}
	return ms(h.Quantile(q)).String()
}

// Print writes every round, the medians and the verdict against the goals.
func (r SaleReport) Print(w io.Writer) {
	s := r.Settings
	fmt.Fprintf(w, "flash sale: a new voucher of %d uses (1 per customer) a round, %d concurrent clients, closed loop, every request a new customer and order, backend direct, until sold out + %v (bound %v)\n",
		s.Uses, s.Conns, s.Tail, s.Limit)
	if s.Baseline {
		fmt.Fprintln(w, "baseline: the same sale on a normal (flashSale=false) voucher, PostgreSQL only, in the same run")
	}
	fmt.Fprintf(w, "%-6s %-7s %14s %7s %9s %9s %11s %10s %6s %6s %5s  %s\n", "round", "voucher", "sold out in", "uses/s",
		"won p50", "won p99", "during p99", "after p99", "201", "409", "other", "CPU per request (cores)")
	for i := range s.Rounds {
		for _, rs := range [][]SaleRound{r.Flash, r.Normal} {
			if i >= len(rs) {
				continue
			}
			x := rs[i]
			res := x.Result
			rps := float64(res.Requests) / max(res.Elapsed.Seconds(), 1e-9)
			fmt.Fprintf(w, "%-6d %-7s %14s %7.0f %9s %9s %11s %10s %6d %6d %5d  %s\n", i+1, kindName(x.Flash),
				soldOutText(res.SoldOut, s.Limit), usesPerSec(res),
				latencyText(&res.Won, 0.5), latencyText(&res.Won, 0.99), latencyText(&res.During, 0.99), latencyText(&res.After, 0.99),
				res.Statuses[201], res.Statuses[409], res.Requests-res.Statuses[201]-res.Statuses[409], x.CPU.String(rps))
			if p := x.Faults(s.Uses); len(p) > 0 {
				fmt.Fprintf(w, "       %s NOT CLEAN: %s\n", x.Code, strings.Join(p, "; "))
			}
		}
	}
	for _, rs := range [][]SaleRound{r.Flash, r.Normal} {
		if len(rs) == 0 {
			continue
		}
		m := summarizeSales(rs)
		fmt.Fprintf(w, "median %s: %s (%.0f uses/s), winners p50 %s p99 %s, everyone's p99 %s during the sale, %s after\n",
			kindName(rs[0].Flash), soldOutPhrase(m.soldOut, s.Limit), m.usesPerSec, durText(m.wonP50), durText(m.wonP99), durText(m.duringP99), durText(m.afterP99))
	}
	if len(r.Normal) > 0 && len(r.Flash) > 0 {
		f, n := summarizeSales(r.Flash), summarizeSales(r.Normal)
		fmt.Fprintf(w, "flash/normal: grants uses %.2f× as fast\n", f.usesPerSec/max(n.usesPerSec, 1e-9))
	}
	clean, met := 0, 0
	for _, x := range r.Flash {
		if len(x.Faults(s.Uses)) == 0 {
			clean++
			if len(x.Misses(s)) == 0 {
				met++
			}
		}
	}
	m := summarizeSales(r.Flash)
	verdict := "goal met"
	if clean < len(r.Flash) || m.soldOut > goalSoldOut || m.wonP99 >= goalWinnersP99 {
		verdict = "goal NOT met"
	}
	fmt.Fprintf(w, "verdict (flash): %d of %d rounds clean (exactly %d granted if sold out, only 201/409, both stores agree), %d of %d within every goal; medians: %s (goal ≤ %v), winners' p99 %v (goal < %v): %s\n",
		clean, len(r.Flash), s.Uses, met, len(r.Flash), soldOutPhrase(m.soldOut, s.Limit), goalSoldOut, ms(m.wonP99), goalWinnersP99, verdict)
}

func kindName(flash bool) string {
	if flash {
		return "flash"
	}
	return "normal"
}
