package flashbench

import (
	"context"
	"fmt"
	"io"
	"time"

	"vouchergate/loadtest/load"
)

// AllWinCode is the flash voucher of the all-win benchmark: 10,000,000 uses, one per
// customer, so no request of a run is refused.
const AllWinCode = "ALLWIN"

// AllWinUses is its total limit, the largest the backend accepts.
const AllWinUses = 10_000_000

// Loop says how a closed-loop comparison runs: alternating rounds of each side.
type Loop struct {
	Rounds   int
	Duration time.Duration // measured per round and side; whole seconds for pgbench's -T
	Warmup   time.Duration // the backend side's unmeasured start of each round
	Conns    int           // the backend side's connections
}

// AllWinSettings say how to compare.
type AllWinSettings struct {
	Loop
	PgClients int // pgbench -c
	PgThreads int // pgbench -j
}

// AllWinReport holds every round of both sides.
type AllWinReport struct {
	Settings   AllWinSettings
	Backend    []load.Result
	BackendCPU []CPUUse
	Solution1  []Solution1Result
	Used       int // the flash voucher's used count at the end
}

// RunAllWin alternates rounds of flash reservations that all win, sent to b, with rounds of
// Solution 1 run by pgbench, taking turns going first.
func RunAllWin(ctx context.Context, b *Backend, s1 *Solution1, s AllWinSettings) (AllWinReport, error) {
	r := AllWinReport{Settings: s}
	if err := b.CreateVoucher(ctx, Voucher{Code: AllWinCode, TotalLimit: AllWinUses, PerUserLimit: 1, FlashSale: true}); err != nil {
		return r, err
	}
	meter := cpuMeter{backendPID: b.PID, redis: b.redis}
	runBackend := func(round int) error {
		res, use, err := backendRound(ctx, b, meter, load.Settings{Conns: s.Conns, Duration: s.Duration, Warmup: s.Warmup,
			Code: AllWinCode, Prefix: fmt.Sprintf("o%d-", round), Customers: fmt.Sprintf("c%d-", round)}, 201)
		if err != nil {
			return fmt.Errorf("backend round %d: %w", round+1, err)
		}
		r.Backend, r.BackendCPU = append(r.Backend, res), append(r.BackendCPU, use)
		return nil
	}
	runPgbench := func(int) error {
		res, err := s1.Run(ctx, s.Duration, cpuMeter{})
		if err != nil {
			return err
		}
		r.Solution1 = append(r.Solution1, res)
		return nil
	}
	for i := range s.Rounds {
		sides := []func(int) error{runBackend, runPgbench}
		if i%2 == 1 { // take turns going first, so a trend in the machine's other load is shared
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, side := range sides {
			if err := side(i); err != nil {
				return r, err
			}
		}
	}
	v, err := b.Voucher(ctx, AllWinCode)
	if err != nil {
		return r, err
	}
	r.Used = v.UsedCount
	var won int64
	for _, res := range r.Backend {
		won += res.Statuses[201]
	}
	if int64(v.UsedCount) < won || v.Counts["RESERVED"] != v.UsedCount || v.UsedCount >= AllWinUses {
		return r, fmt.Errorf("voucher %s after the run: %+v, with %d granted in the measured time", AllWinCode, v, won)
	}
	return r, nil
}

// BackendRPS and PgbenchTPS are the medians of each side's rounds.
func (r AllWinReport) BackendRPS() float64 {
	return median(collect(r.Backend, func(x load.Result) float64 { return x.RPS() }))
}

func (r AllWinReport) PgbenchTPS() float64 {
	return median(collect(r.Solution1, func(x Solution1Result) float64 { return x.TPS }))
}

// Ratio is the backend's median rate over pgbench's.
func (r AllWinReport) Ratio() float64 {
	if r.PgbenchTPS() == 0 {
		return 0
	}
	return r.BackendRPS() / r.PgbenchTPS()
}

// Print writes every round, the medians, the ratio and where the CPU went.
func (r AllWinReport) Print(w io.Writer) {
	s := r.Settings
	fmt.Fprintf(w, "flash reservations that all win (voucher %s: %d uses, 1 per customer; every request a new customer and order), backend direct, %d connections, closed loop, %v warm-up + %v\n",
		AllWinCode, AllWinUses, s.Conns, s.Warmup, s.Duration)
	if len(r.Solution1) > 0 {
		fmt.Fprintf(w, "vs Solution 1 on its own schema: %s (%d clients)\n", r.Solution1[0].Command, s.PgClients)
	}
	fmt.Fprintf(w, "%-6s %-8s %10s %10s %10s  %s\n", "round", "side", "req/s", "p50", "p99", "CPU per request (cores)")
	for i := range max(len(r.Backend), len(r.Solution1)) {
		if i < len(r.Backend) {
			x := r.Backend[i]
			fmt.Fprintf(w, "%-6d %-8s %10.0f %10v %10v  %s\n", i+1, "backend", x.RPS(), ms(x.Latency.Quantile(0.5)), ms(x.Latency.Quantile(0.99)), r.BackendCPU[i].String(x.RPS()))
		}
		if i < len(r.Solution1) {
			x := r.Solution1[i]
			fmt.Fprintf(w, "%-6d %-8s %10.0f %10v %10v  %s\n", i+1, "pgbench", x.TPS, ms(x.P50), ms(x.P99), x.CPU.String(x.TPS))
		}
	}
	bp99 := median(collect(r.Backend, func(x load.Result) time.Duration { return x.Latency.Quantile(0.99) }))
	pp99 := median(collect(r.Solution1, func(x Solution1Result) time.Duration { return x.P99 }))
	fmt.Fprintf(w, "median backend: %.0f req/s, p99 %v (voucher used %d times in all)\n", r.BackendRPS(), ms(bp99), r.Used)
	fmt.Fprintf(w, "median pgbench (Solution 1): %.0f tps, p99 %v\n", r.PgbenchTPS(), ms(pp99))
	fmt.Fprintf(w, "ratio backend/pgbench: %.2f (goal >= %d: %s)\n", r.Ratio(), AllWinGoalRatio, verdict(r.Ratio() >= AllWinGoalRatio))
	perWin := r.CPUPerWin()
	fmt.Fprintf(w, "CPU per win, backend + postgres + redis: %.0f µs median (goal <= %d: %s)\n", perWin, AllWinGoalCPU, verdict(perWin <= AllWinGoalCPU))
}

// The all-win run's goals: flash winners per second against Solution 1's transactions, and the
// CPU one win costs the backend, PostgreSQL and Redis together, in microseconds.
const (
	AllWinGoalRatio = 20
	AllWinGoalCPU   = 100
)

// CPUPerWin is the median over the backend's rounds of the CPU a win cost the backend,
// PostgreSQL and Redis together, in microseconds (the generator is apart).
func (r AllWinReport) CPUPerWin() float64 {
	var per []float64
	for i, x := range r.Backend {
		if i < len(r.BackendCPU) {
			u := r.BackendCPU[i]
			per = append(per, u.PerRequest(u.Backend+u.Postgres+u.Redis, x.RPS()))
		}
	}
	return median(per)
}

func verdict(met bool) string {
	if met {
		return "goal met"
	}
	return "goal NOT met"
}

// ms rounds a latency to about three significant digits for printing.
func ms(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Millisecond)
	}
	if d >= 10*time.Millisecond {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// backendRound runs one closed-loop round of reservations at b and measures the CPU it took;
// every request must be answered status.
func backendRound(ctx context.Context, b *Backend, meter cpuMeter, ls load.Settings, status int) (load.Result, CPUUse, error) {
	start := meter.sample(ctx)
	res, err := load.Run(ctx, b.Addr, ls)
	use := start.until(meter.sample(ctx))
	if err != nil {
		return res, use, err
	}
	if res.Errors > 0 || res.Statuses[status] != res.Requests {
		return res, use, fmt.Errorf("answered %v with %d failed connections; want only %d", res.Statuses, res.Errors, status)
	}
	return res, use, nil
}
