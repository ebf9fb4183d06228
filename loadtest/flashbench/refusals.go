package flashbench

import (
	"context"
	"fmt"
	"io"
	"time"

	"vouchergate/loadtest/load"
)

// SoldOutCode is the flash voucher of the refusals benchmark: one use, taken before the first
// round, so every request of a round is refused at the Redis gate (409 OUT_OF_STOCK), as a
// hot voucher's are between its sell-out and the edges learning of it.
const SoldOutCode = "SOLDOUT"

// WinningCode is its baseline's voucher: as the all-win benchmark's, a use for every request.
const WinningCode = "WINNING"

// RefusalSettings say how to compare.
type RefusalSettings struct{ Loop }

// RefusalReport holds every round of both sides: reservations refused at the gate, and the
// baseline, reservations that all win.
type RefusalReport struct {
	Settings             RefusalSettings
	Refused, Won         []load.Result
	RefusedCPU, WonCPU   []CPUUse
	UsedSoldOut, UsedWon int // the vouchers' used counts at the end
}

// RunRefusals alternates rounds of new customers' reservations of a sold-out flash voucher
// with rounds of reservations that all win (WinningCode), taking turns going first, and
// measures what each costs the backend and Redis per request.
func RunRefusals(ctx context.Context, b *Backend, s RefusalSettings) (RefusalReport, error) {
	r := RefusalReport{Settings: s}
	for _, v := range []Voucher{
		{Code: SoldOutCode, TotalLimit: 1, PerUserLimit: 1, FlashSale: true},
		{Code: WinningCode, TotalLimit: AllWinUses, PerUserLimit: 1, FlashSale: true},
	} {
		if err := b.CreateVoucher(ctx, v); err != nil {
			return r, err
		}
	}
	// take the one use: a single connection, its first customer wins, the rest are refused
	if _, err := load.Run(ctx, b.Addr, load.Settings{Conns: 1, Duration: 200 * time.Millisecond, Code: SoldOutCode,
		Prefix: "first-", Customers: "first-"}); err != nil {
		return r, fmt.Errorf("take the last use of %s: %w", SoldOutCode, err)
	}
	meter := cpuMeter{backendPID: b.PID, redis: b.redis}
	side := func(code string, status int, results *[]load.Result, cpu *[]CPUUse) func(int) error {
		return func(round int) error {
			res, use, err := backendRound(ctx, b, meter, load.Settings{Conns: s.Conns, Duration: s.Duration, Warmup: s.Warmup,
				Code: code, Prefix: fmt.Sprintf("%s-o%d-", code, round), Customers: fmt.Sprintf("%s-c%d-", code, round)}, status)
			if err != nil {
				return fmt.Errorf("%s round %d: %w", code, round+1, err)
			}
			*results, *cpu = append(*results, res), append(*cpu, use)
			return nil
		}
	}
	refused, won := side(SoldOutCode, 409, &r.Refused, &r.RefusedCPU), side(WinningCode, 201, &r.Won, &r.WonCPU)
	for i := range s.Rounds {
		sides := []func(int) error{refused, won}
		if i%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, run := range sides {
			if err := run(i); err != nil {
				return r, err
			}
		}
	}
	for code, used := range map[string]*int{SoldOutCode: &r.UsedSoldOut, WinningCode: &r.UsedWon} {
		v, err := b.Voucher(ctx, code)
		if err != nil {
			return r, err
		}
		*used = v.UsedCount
	}
	if r.UsedSoldOut != 1 {
		return r, fmt.Errorf("voucher %s used %d times after the run; want its one use", SoldOutCode, r.UsedSoldOut)
	}
	return r, nil
}

// perRequest is the median over the rounds of the CPU per request that of picks, in µs.
func perRequest(results []load.Result, cpu []CPUUse, of func(CPUUse) time.Duration) float64 {
	v := make([]float64, len(results))
	for i, res := range results {
		v[i] = cpu[i].PerRequest(of(cpu[i]), res.RPS())
	}
	return median(v)
}

// Print writes every round, then the medians of each side and the refusal's cost as a share of
// a win's.
func (r RefusalReport) Print(w io.Writer) {
	s := r.Settings
	fmt.Fprintf(w, "flash reservations refused at the gate (voucher %s, sold out) vs reservations that all win (voucher %s), backend direct, %d connections, closed loop, %v warm-up + %v, new customer and order each\n",
		SoldOutCode, WinningCode, s.Conns, s.Warmup, s.Duration)
	fmt.Fprintf(w, "%-6s %-8s %10s %10s %10s  %s\n", "round", "side", "req/s", "p50", "p99", "CPU per request (cores)")
	row := func(i int, name string, x load.Result, u CPUUse) {
		fmt.Fprintf(w, "%-6d %-8s %10.0f %10v %10v  %s\n", i+1, name, x.RPS(), ms(x.Latency.Quantile(0.5)), ms(x.Latency.Quantile(0.99)), u.String(x.RPS()))
	}
	for i := range max(len(r.Refused), len(r.Won)) {
		if i < len(r.Refused) {
			row(i, "refused", r.Refused[i], r.RefusedCPU[i])
		}
		if i < len(r.Won) {
			row(i, "won", r.Won[i], r.WonCPU[i])
		}
	}
	rps := func(xs []load.Result) float64 {
		return median(collect(xs, func(x load.Result) float64 { return x.RPS() }))
	}
	backend := func(u CPUUse) time.Duration { return u.Backend }
	redis := func(u CPUUse) time.Duration { return u.Redis }
	rb, wb := perRequest(r.Refused, r.RefusedCPU, backend), perRequest(r.Won, r.WonCPU, backend)
	rr, wr := perRequest(r.Refused, r.RefusedCPU, redis), perRequest(r.Won, r.WonCPU, redis)
	fmt.Fprintf(w, "median refused: %.0f req/s, backend %.0f µs, redis %.0f µs a request\n", rps(r.Refused), rb, rr)
	fmt.Fprintf(w, "median won:     %.0f req/s, backend %.0f µs, redis %.0f µs a request\n", rps(r.Won), wb, wr)
	if wb > 0 && wr > 0 {
		fmt.Fprintf(w, "a refusal costs %.2f of a win in the backend, %.2f in Redis\n", rb/wb, rr/wr)
	}
}
