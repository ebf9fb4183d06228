package jobs_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"vouchergate/backend/jobs"
	"vouchergate/backend/voucher"
	"vouchergate/testkit"
)

// Each job runs on its own interval, and a job whose interval is 0 never runs. Every job is
// fast (a millisecond) in one case, hourly in another and off in the third, so a job run on
// another's setting shows. An hour does not come round within a test: an hourly job must not
// have run either.
func TestRunRunsEachJobAtItsIntervalAndNotWhenDisabled(t *testing.T) {
	const fast, hourly, off = time.Millisecond, time.Hour, time.Duration(0)
	cases := []struct {
		name string
		set  jobs.Settings
	}{
		{"expire", jobs.Settings{ExpireEvery: fast, ReconcileEvery: off, WarmupEvery: hourly}},
		{"reconcile", jobs.Settings{ExpireEvery: hourly, ReconcileEvery: fast, WarmupEvery: off}},
		{"warmup", jobs.Settings{ExpireEvery: off, ReconcileEvery: hourly, WarmupEvery: fast}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.set)
			e.createVoucher(t, "FLASH", 5, true, e.clock.Now().Add(-time.Hour))
			stop := e.run(t)
			testkit.Eventually(t, c.name+" to run three times", func() bool { return e.store.count(c.name) >= 3 })
			stop()
			for _, other := range []string{"expire", "reconcile", "warmup"} {
				if n := e.store.count(other); other != c.name && n != 0 {
					t.Errorf("%s ran %d times with %+v; want only %s", other, n, c.set, c.name)
				}
			}
		})
	}
}

// Run's goroutines all return once its ctx ends.
func TestRunReturnsWhenCtxEnds(t *testing.T) {
	e := newEnv(t, jobs.Settings{ExpireEvery: time.Millisecond, ReconcileEvery: time.Millisecond,
		WarmupEvery: time.Millisecond})
	stop := e.run(t)
	testkit.Eventually(t, "every job to run", func() bool {
		return e.store.count("expire") > 0 && e.store.count("reconcile") > 0 && e.store.count("warmup") > 0
	})
	stop() // fails the test unless Run's done channel closes
}

// A run in flight when ctx ends gets its ctx ended too, and no run starts after it: the tick
// that came while the run was blocked is dropped, not run on a dead context.
func TestRunEndsARunInFlightAndStartsNoOtherWhenCtxEnds(t *testing.T) {
	e := newEnv(t, jobs.Settings{ExpireEvery: time.Millisecond})
	started := make(chan struct{})
	e.store.failWith(func(ctx context.Context, call string, n int) error {
		if call == "expire" && n == 1 {
			close(started)
			<-ctx.Done() // the run's ctx: a run's timeout is 30s, past testkit.WaitBound
			return ctx.Err()
		}
		return nil
	})
	stop := e.run(t)
	testkit.Eventually(t, "the first run to start", closed(started))
	stop()
	if n := e.store.count("expire"); n != 1 {
		t.Errorf("expiry ran %d times; want only the run that was in flight when ctx ended", n)
	}
}

// A run that fails is logged, and the next tick runs the job again: here it releases the holds
// the failed run could not.
func TestFailedRunIsLoggedAndTheNextTickRuns(t *testing.T) {
	e := newEnv(t, jobs.Settings{ExpireEvery: time.Millisecond})
	e.createVoucher(t, "HOLD", 5, false, e.clock.Now().Add(-time.Hour))
	e.reserve(t, "HOLD", "a")
	e.reserve(t, "HOLD", "b")
	e.clock.Advance(16 * time.Minute) // past the hold time (15m)
	e.store.failWith(func(_ context.Context, call string, n int) error {
		if call == "expire" && n == 1 {
			return errInjected
		}
		return nil
	})
	stop := e.run(t)
	testkit.Eventually(t, "a later run to release both holds", func() bool { return e.metrics(t)[expired] == 2 })
	stop()
	// a run that stop cut short is logged too, with context.Canceled
	var failed []map[string]string
	for _, w := range e.log.warnings("expire holds") {
		if strings.Contains(w["err"], errInjected.Error()) {
			failed = append(failed, w)
		}
	}
	if len(failed) != 1 || failed[0]["released"] != "0" {
		t.Errorf("warnings of the failed run %v; want one, with 0 released", failed)
	}
}

// Expire returns how many holds it released and counts them; confirmed holds and holds still
// within their time stay.
func TestExpireReturnsAndCountsReleasedHolds(t *testing.T) {
	e := newEnv(t, jobs.Settings{})
	ctx := context.Background()
	e.createVoucher(t, "HOLD", 5, false, e.clock.Now().Add(-time.Hour))
	e.createVoucher(t, "FLASH", 5, true, e.clock.Now().Add(-time.Hour))
	for _, o := range []string{"a", "b", "c"} {
		e.reserve(t, "HOLD", o)
	}
	e.reserve(t, "FLASH", "f")
	if _, err := e.svc.Confirm(ctx, "HOLD", "b"); err != nil {
		t.Fatalf("confirm b: %v", err)
	}
	expire := func(want int, what string) {
		t.Helper()
		if n, err := e.jobs.Expire(ctx); n != want || err != nil {
			t.Errorf("expire %s: %d released (%v); want %d", what, n, err, want)
		}
	}
	expire(0, "within the hold time")
	e.checkMetrics(t, nil)
	e.clock.Advance(16 * time.Minute)
	expire(3, "after the hold time") // a, c and f
	e.checkMetrics(t, map[string]float64{expired: 3})
	expire(0, "again")
	e.checkMetrics(t, map[string]float64{expired: 3})
	if warned := e.log.warnings("expire holds"); len(warned) != 0 {
		t.Errorf("warnings %v for runs that went well", warned)
	}
}

// Reconciling one code returns its report and counts what it released and put back; the drift
// gauge says the drift of the last reconciliation, not a sum.
func TestReconcileOneCodeReturnsItsReportAndCountsIt(t *testing.T) {
	e := newEnv(t, jobs.Settings{})
	ctx := context.Background()
	v := e.createVoucher(t, "REC", 10, true, e.clock.Now().Add(-time.Hour))
	e.reserve(t, "REC", "a")
	e.reserve(t, "REC", "b")
	hang(t, e, v, "h1", "h2")
	lose(t, e, "REC", "b")
	e.clock.Advance(grace + time.Second)

	reports, err := e.jobs.Reconcile(ctx, "REC")
	if err != nil || len(reports) != 1 {
		t.Fatalf("reconcile REC: %+v, %v; want one report", reports, err)
	}
	r := reports[0]
	slices.Sort(r.Released)
	// Redis had 10 - a - b - h1 - h2 + b = 7 uses left; the database says 10 - a - b = 8
	if r.Code != "REC" || !slices.Equal(r.Released, []string{"h1", "h2"}) || !slices.Equal(r.PutBack, []string{"b"}) || r.Drift != -1 {
		t.Errorf("report %+v; want h1 and h2 released, b put back, drift -1", r)
	}
	e.checkMetrics(t, map[string]float64{released: 2, putBack: 1, drift("REC"): -1})

	reports, err = e.jobs.Reconcile(ctx, "REC")
	if err != nil || len(reports) != 1 || len(reports[0].Released)+len(reports[0].PutBack) != 0 || reports[0].Drift != 0 {
		t.Fatalf("reconcile REC again: %+v, %v; want nothing to fix", reports, err)
	}
	e.checkMetrics(t, map[string]float64{released: 2, putBack: 1, drift("REC"): 0})
}

// Reconciling all codes returns a report for each flash voucher and counts them all, a drift
// gauge for each; a voucher of the database path has none.
func TestReconcileAllCodesReturnsEveryReportAndCountsThem(t *testing.T) {
	e := newEnv(t, jobs.Settings{})
	twoDrifted(t, e)
	e.clock.Advance(grace + time.Second)

	reports, err := e.jobs.Reconcile(context.Background(), "")
	if err != nil || len(reports) != 2 {
		t.Fatalf("reconcile all: %+v, %v; want two reports", reports, err)
	}
	slices.SortFunc(reports, func(a, b voucher.Reconciliation) int { return strings.Compare(a.Code, b.Code) })
	if one := reports[0]; one.Code != "ONE" || !slices.Equal(one.Released, []string{"ghost"}) || len(one.PutBack) != 0 || one.Drift != -1 {
		t.Errorf("ONE: %+v; want ghost released, drift -1", one)
	}
	if two := reports[1]; two.Code != "TWO" || len(two.Released) != 0 || !slices.Equal(two.PutBack, []string{"t1"}) || two.Drift != 1 {
		t.Errorf("TWO: %+v; want t1 put back, drift 1", two)
	}
	e.checkMetrics(t, map[string]float64{released: 1, putBack: 1, drift("ONE"): -1, drift("TWO"): 1})
	if problems, err := testutil.GatherAndLint(e.reg); err != nil || len(problems) != 0 {
		t.Errorf("the jobs' metrics fail the linter: %v %v", problems, err)
	}
}

// When one voucher's reconciliation fails, the others' reports are still returned and counted,
// with the error, and the failure is logged.
func TestReconcileAllCountsWhatItDidWhenOneVoucherFails(t *testing.T) {
	e := newEnv(t, jobs.Settings{})
	twoDrifted(t, e)
	e.clock.Advance(grace + time.Second)
	e.store.failWith(func(_ context.Context, call string, _ int) error {
		if call == "active TWO" {
			return errInjected
		}
		return nil
	})

	reports, err := e.jobs.Reconcile(context.Background(), "")
	if !errors.Is(err, errInjected) || len(reports) != 1 || reports[0].Code != "ONE" {
		t.Fatalf("reconcile all: %+v, %v; want ONE's report and TWO's error", reports, err)
	}
	e.checkMetrics(t, map[string]float64{released: 1, drift("ONE"): -1})
	if warned := e.log.warnings("reconcile"); len(warned) != 1 || !strings.Contains(warned[0]["err"], "TWO") {
		t.Errorf("warnings %v; want one naming TWO", warned)
	}
}

// Warm-up returns how many flash vouchers it loaded and counts them: those opening within
// ahead, not those loaded already nor those opening later, until they open soon.
func TestWarmupReturnsAndCountsLoadedVouchers(t *testing.T) {
	e := newEnv(t, jobs.Settings{})
	ctx := context.Background()
	now := e.clock.Now()
	e.createVoucher(t, "OPEN", 5, true, now.Add(-time.Hour))
	if err := e.svc.Warm(ctx, "OPEN"); err != nil {
		t.Fatal(err)
	}
	e.createVoucher(t, "SOON", 5, true, now.Add(5*time.Minute))
	e.createVoucher(t, "LATER", 5, true, now.Add(2*time.Hour))
	warmup := func(want int, what string) {
		t.Helper()
		if n, err := e.jobs.Warmup(ctx); n != want || err != nil {
			t.Errorf("warm up %s: %d loaded (%v); want %d", what, n, err, want)
		}
	}
	warmup(1, "with SOON ahead") // SOON
	e.checkMetrics(t, map[string]float64{warmed: 1})
	warmup(0, "again")
	e.checkMetrics(t, map[string]float64{warmed: 1})
	e.clock.Advance(2*time.Hour - 5*time.Minute)
	warmup(1, "with LATER ahead") // LATER
	e.checkMetrics(t, map[string]float64{warmed: 2})
	for _, code := range []string{"OPEN", "SOON", "LATER"} {
		if _, loaded, err := e.backend.App.Gate.Remaining(ctx, code); !loaded || err != nil {
			t.Errorf("%s not loaded (%v)", code, err)
		}
	}
}

// The forget job deletes from Redis the flash vouchers that ended ForgetAfter ago, counts them
// and says so in one line; with ForgetAfter 0 it deletes nothing.
func TestForgetReturnsAndCountsForgottenVouchers(t *testing.T) {
	const keep = 48 * time.Hour
	e := newEnv(t, jobs.Settings{ForgetAfter: keep})
	ctx := context.Background()
	e.createVoucher(t, "PAST", 5, true, e.clock.Now().Add(-time.Hour)) // ends in 23 hours
	if err := e.svc.Warm(ctx, "PAST"); err != nil {
		t.Fatal(err)
	}
	off := jobs.New(e.svc, jobs.Settings{}, prometheus.NewRegistry(), testkit.QuietLog)
	forget := func(j *jobs.Jobs, want int, what string) {
		t.Helper()
		if n, err := j.Forget(ctx); n != want || err != nil {
			t.Errorf("forget %s: %d (%v); want %d", what, n, err, want)
		}
	}
	forget(e.jobs, 0, "while PAST is open")
	e.clock.Advance(23*time.Hour + keep + time.Minute)
	forget(off, 0, "with ForgetAfter 0")
	forget(e.jobs, 1, "once PAST ended ForgetAfter ago")
	e.checkMetrics(t, map[string]float64{forgotten: 1})
	if _, loaded, err := e.backend.App.Gate.Remaining(ctx, "PAST"); loaded || err != nil {
		t.Errorf("PAST still loaded (%v)", err)
	}
	if n := e.log.count(slog.LevelInfo, "ended flash vouchers deleted from redis"); n != 1 {
		t.Errorf("the job said what it deleted in %d info lines; want 1", n)
	}
}

// A job whose run fails returns the error, counts nothing, and logs a warning with the error;
// after a store failure the next run goes well.
func TestEachJobLogsItsFailure(t *testing.T) {
	cases := []struct {
		name string
		fail string // the store call that fails once; "" for none
		want error
		warn string // the message logged
		run  func(context.Context, *jobs.Jobs) error
	}{
		{"expire", "expire", errInjected, "expire holds",
			func(ctx context.Context, j *jobs.Jobs) error { _, err := j.Expire(ctx); return err }},
		{"reconcile one code", "active FLASH", errInjected, "reconcile",
			func(ctx context.Context, j *jobs.Jobs) error { _, err := j.Reconcile(ctx, "FLASH"); return err }},
		{"reconcile all codes", "reconcile", errInjected, "reconcile",
			func(ctx context.Context, j *jobs.Jobs) error { _, err := j.Reconcile(ctx, ""); return err }},
		{"warm up", "warmup", errInjected, "warm up",
			func(ctx context.Context, j *jobs.Jobs) error { _, err := j.Warmup(ctx); return err }},
		{"reconcile an unknown code", "", voucher.ErrVoucherNotFound, "reconcile",
			func(ctx context.Context, j *jobs.Jobs) error { _, err := j.Reconcile(ctx, "NOSUCH"); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, jobs.Settings{})
			ctx := context.Background()
			e.createVoucher(t, "FLASH", 5, true, e.clock.Now().Add(-time.Hour))
			e.store.failWith(func(_ context.Context, call string, n int) error {
				if call == c.fail && n == 1 {
					return errInjected
				}
				return nil
			})
			err := c.run(ctx, e.jobs)
			if !errors.Is(err, c.want) {
				t.Fatalf("run: %v; want %v", err, c.want)
			}
			warned := e.log.warnings(c.warn)
			if len(warned) != 1 || warned[0]["err"] != err.Error() {
				t.Errorf("warnings %q: %v; want one with the error %q", c.warn, warned, err)
			}
			e.checkMetrics(t, nil)
			if c.fail != "" {
				if err := c.run(ctx, e.jobs); err != nil {
					t.Errorf("the next run: %v", err)
				}
			}
		})
	}
}

// hang takes a use in Redis for each order, with no row: as a backend does that dies between
// Redis and PostgreSQL.
func hang(t *testing.T, e *env, v voucher.Voucher, orders ...string) {
	t.Helper()
	for _, o := range orders {
		h := voucher.Holder{CustomerID: "ghost-" + o, ReservedAt: e.clock.Now(), Attempt: "x1"}
		if res, err := e.backend.App.Gate.Reserve(context.Background(), v, o, h); err != nil || res.Outcome != voucher.GateReserved {
			t.Fatalf("take a hanging use for %s: %+v %v", o, res, err)
		}
	}
}

// lose gives back in Redis the use of an order that holds an active row, as a Redis that lost
// a write does.
func lose(t *testing.T, e *env, code, order string) {
	t.Helper()
	if ok, _, err := e.backend.App.Gate.Release(context.Background(), code, order, nil); !ok || err != nil {
		t.Fatalf("lose %s in Redis: %v %v", order, ok, err)
	}
}

// twoDrifted makes two flash vouchers Redis has drifted from: ONE holds a use for "ghost",
// which has no row (drift -1), TWO lost the use of t1, which has (drift 1); and a voucher of
// the database path, PLAIN, which reconciliation leaves alone.
func twoDrifted(t *testing.T, e *env) {
	t.Helper()
	start := e.clock.Now().Add(-time.Hour)
	one := e.createVoucher(t, "ONE", 5, true, start)
	if err := e.svc.Warm(context.Background(), "ONE"); err != nil {
		t.Fatal(err)
	}
	hang(t, e, one, "ghost")
	e.createVoucher(t, "TWO", 5, true, start)
	e.reserve(t, "TWO", "t1")
	lose(t, e, "TWO", "t1")
	e.createVoucher(t, "PLAIN", 5, false, start)
	e.reserve(t, "PLAIN", "p1")
}
