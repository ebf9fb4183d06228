// Package jobs runs the backend's periodic work: hold expiry, Redis/PostgreSQL reconciliation
// and flash-sale warm-up, and counts what they do in Prometheus metrics
// (prometheus/client_golang, the standard Go client).
package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"vouchergate/backend/voucher"
)

// Settings say how often each job runs; a zero interval turns a job off.
type Settings struct {
	ExpireEvery    time.Duration
	ReconcileEvery time.Duration
	WarmupEvery    time.Duration
	WarmupAhead    time.Duration
	Reconcile      voucher.ReconcileConfig
	// ForgetAfter is how long after a flash voucher ends its Redis keys are deleted, by a job
	// run every forgetEvery; zero keeps them.
	ForgetAfter time.Duration
}

// forgetEvery is how often the forget job runs: a voucher is due once, for a week (voucher
// ForgetEnded), so an hour's lateness costs nothing.
const forgetEvery = time.Hour

// Jobs runs the periodic work of one backend. Several backends may run it at once.
type Jobs struct {
	vouchers *voucher.Service
	settings Settings
	log      *slog.Logger

	expired  prometheus.Counter
	released prometheus.Counter
	putBack  prometheus.Counter
	drift    *prometheus.GaugeVec
	// a flash sale's limit, at the last reconciliation (its uses left: the voucher service's)
	warmed    prometheus.Counter
	forgotten prometheus.Counter
}

// New returns the jobs of a service, with their metrics registered in reg.
func New(vouchers *voucher.Service, set Settings, reg prometheus.Registerer, log *slog.Logger) *Jobs {
	j := &Jobs{vouchers: vouchers, settings: set, log: log,
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "vouchergate_holds_expired_total",
			Help: "Reservations released because their hold expired."}),
		released: prometheus.NewCounter(prometheus.CounterOpts{Name: "vouchergate_reconcile_released_total",
			Help: "Orders held in Redis without an active row, released by reconciliation."}),
		putBack: prometheus.NewCounter(prometheus.CounterOpts{Name: "vouchergate_reconcile_put_back_total",
			Help: "Active rows Redis had lost, put back by reconciliation."}),
		drift: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vouchergate_redis_drift",
			Help: "Redis's uses left minus what the database leaves (total_limit minus active rows and orders in flight), at the last reconciliation."}, []string{"code"}),
		warmed: prometheus.NewCounter(prometheus.CounterOpts{Name: "vouchergate_warmups_total",
			Help: "Flash vouchers loaded into Redis by the warm-up job."}),
		forgotten: prometheus.NewCounter(prometheus.CounterOpts{Name: "vouchergate_flash_vouchers_forgotten_total",
			Help: "Ended flash vouchers whose Redis keys the forget job deleted (VG_FLASH_KEYS_KEEP after their end)."}),
	}
	reg.MustRegister(j.expired, j.released, j.putBack, j.drift, j.warmed, j.forgotten)
	return j
}

// Run runs every enabled job, each in a goroutine of its own, until ctx ends; it returns at
// once. The channel it returns is closed when every one of those goroutines has returned, so a
// caller (a test, or a shutdown that closes the stores) can know no run is left.
func (j *Jobs) Run(ctx context.Context) <-chan struct{} {
	var forget time.Duration // off
	if j.settings.ForgetAfter > 0 {
		forget = forgetEvery
	}
	runs := []struct {
		interval time.Duration
		run      func(context.Context)
	}{
		{j.settings.ExpireEvery, func(ctx context.Context) { _, _ = j.Expire(ctx) }},
		{j.settings.ReconcileEvery, func(ctx context.Context) { _, _ = j.Reconcile(ctx, "") }},
		{j.settings.WarmupEvery, func(ctx context.Context) { _, _ = j.Warmup(ctx) }},
		{forget, func(ctx context.Context) { _, _ = j.Forget(ctx) }},
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			every(ctx, r.interval, r.run)
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

func every(ctx context.Context, interval time.Duration, run func(context.Context)) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// A tick that came during the last run and ctx's end may be ready together, and
			// select picks either: the tick must not start a run on a context already ended.
			if ctx.Err() != nil {
				return
			}
			rctx, cancel := context.WithTimeout(ctx, max(interval, 30*time.Second))
			run(rctx)
			cancel()
		}
	}
}

// Expire releases expired holds now.
func (j *Jobs) Expire(ctx context.Context) (int, error) {
	n, err := j.vouchers.ExpireHolds(ctx)
	j.expired.Add(float64(n))
	if err != nil {
		j.log.Warn("expire holds", "released", n, "err", err)
	} else if n > 0 {
		j.log.Info("expired holds released", "released", n)
	}
	return n, err
}

// Reconcile reconciles one flash voucher, or all of them when code is empty.
func (j *Jobs) Reconcile(ctx context.Context, code string) ([]voucher.Reconciliation, error) {
	var reports []voucher.Reconciliation
	var err error
	if code == "" {
		reports, err = j.vouchers.ReconcileAll(ctx, j.settings.Reconcile)
	} else {
		var one voucher.Reconciliation
		if one, err = j.vouchers.Reconcile(ctx, code, j.settings.Reconcile); err == nil {
			reports = append(reports, one)
		}
	}
	for _, r := range reports {
		j.released.Add(float64(len(r.Released)))
		j.putBack.Add(float64(len(r.PutBack)))
		j.drift.WithLabelValues(r.Code).Set(float64(r.Drift))
		if r.Loaded || r.Recounted || len(r.Released) > 0 || len(r.PutBack) > 0 {
			j.log.Info("reconciled", "code", r.Code, "loaded", r.Loaded, "recounted", r.Recounted,
				"released", len(r.Released), "putBack", len(r.PutBack), "drift", r.Drift)
		}
	}
	if err != nil {
		j.log.Warn("reconcile", "err", err)
	}
	return reports, err
}

// Forget deletes from Redis the flash vouchers that ended ForgetAfter ago (none when it is 0).
func (j *Jobs) Forget(ctx context.Context) (int, error) {
	if j.settings.ForgetAfter <= 0 {
		return 0, nil
	}
	n, err := j.vouchers.ForgetEnded(ctx, j.settings.ForgetAfter)
	j.forgotten.Add(float64(n))
	if err != nil {
		j.log.Warn("forget ended flash vouchers", "forgotten", n, "err", err)
	} else if n > 0 {
		j.log.Info("ended flash vouchers deleted from redis", "forgotten", n, "endedBefore", j.settings.ForgetAfter)
	}
	return n, err
}

// Warmup loads the flash vouchers opening soon now.
func (j *Jobs) Warmup(ctx context.Context) (int, error) {
	n, err := j.vouchers.WarmUpcoming(ctx, j.settings.WarmupAhead)
	j.warmed.Add(float64(n))
	if err != nil {
		j.log.Warn("warm up", "loaded", n, "err", err)
	} else if n > 0 {
		j.log.Info("flash vouchers warmed up", "loaded", n)
	}
	return n, err
}
