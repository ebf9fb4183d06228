package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"vouchergate/backend/backendtest"
	"vouchergate/backend/jobs"
	"vouchergate/backend/voucher"
	"vouchergate/shared/events"
	"vouchergate/testkit"
)

const (
	grace = 30 * time.Second // how long reconciliation leaves an order held without a row
	ahead = 10 * time.Minute // how far ahead warm-up loads
)

// The jobs' metrics, as metrics names them.
const (
	expired   = "vouchergate_holds_expired_total"
	released  = "vouchergate_reconcile_released_total"
	putBack   = "vouchergate_reconcile_put_back_total"
	warmed    = "vouchergate_warmups_total"
	forgotten = "vouchergate_flash_vouchers_forgotten_total"
)

// drift names the drift gauge of one voucher, as metrics names it.
func drift(code string) string { return "vouchergate_redis_drift{" + code + "}" }

// errInjected is the failure the tests' store answers with where a test asks it to.
var errInjected = errors.New("injected store failure")

// env is the jobs of a voucher service on real stores: a test backend's PostgreSQL store
// (behind recordingStore) and Redis gate, a clock that moves only when told, the jobs' own
// registry and what they logged.
type env struct {
	backend *backendtest.Backend
	clock   *testkit.ManualClock
	store   *recordingStore
	svc     *voucher.Service
	jobs    *jobs.Jobs
	reg     *prometheus.Registry
	log     *logRecorder
}

// newEnv builds the jobs with the intervals of set; reconciliation's grace and warm-up's reach
// are grace and ahead. The backend's own jobs are off (backendtest.Config).
func newEnv(t *testing.T, set jobs.Settings) *env {
	t.Helper()
	b := backendtest.Start(t, backendtest.Config(t))
	clock := testkit.NewManualClock(time.Now())
	e := &env{backend: b, clock: clock, reg: prometheus.NewRegistry(), log: &logRecorder{},
		store: &recordingStore{Store: b.App.Store, clock: clock, calls: map[string]int{}}}
	// the service's own warnings go nowhere: the log the tests read is the jobs'
	e.svc = voucher.NewService(e.store, b.App.Gate, silent{}, voucher.Config{Clock: clock, Log: testkit.QuietLog})
	set.Reconcile = voucher.ReconcileConfig{Grace: grace}
	set.WarmupAhead = ahead
	e.jobs = jobs.New(e.svc, set, e.reg, slog.New(e.log))
	return e
}

// run runs the jobs until the returned stop is called (or the test ends); stop returns once
// every goroutine Run started has returned, and fails the test if they have not within
// testkit.WaitBound.
func (e *env) run(t *testing.T) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := e.jobs.Run(ctx)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			testkit.Eventually(t, "Run's goroutines to return after its ctx ended", closed(done))
		})
	}
	t.Cleanup(stop) // before the backend's cleanup closes the stores under a running job
	return stop
}

// closed reports, when called, whether ch is closed.
func closed(ch <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}

// createVoucher creates a voucher open from start for a day, in the database alone: a flash
// voucher is not loaded into Redis until something warms it.
func (e *env) createVoucher(t *testing.T, code string, total int, flash bool, start time.Time) voucher.Voucher {
	t.Helper()
	v := voucher.Voucher{Code: code, DiscountAmount: 5, TotalLimit: total, PerUserLimit: 1,
		StartsAt: start, EndsAt: start.Add(24 * time.Hour), FlashSale: flash}
	if err := e.store.CreateVoucher(context.Background(), v); err != nil {
		t.Fatalf("create voucher %s: %v", code, err)
	}
	v, err := e.store.Voucher(context.Background(), code) // as stored: its revision
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// reserve reserves code for order, by a customer of its own, and fails the test unless granted.
func (e *env) reserve(t *testing.T, code, order string) {
	t.Helper()
	req := voucher.Request{Code: code, CustomerID: "c-" + order, OrderID: order, OrderAmount: 100}
	if _, err := e.svc.Reserve(context.Background(), req); err != nil {
		t.Fatalf("reserve %s for %s: %v", code, order, err)
	}
}

// metrics returns every sample of the jobs' registry: counters by name, the drift gauge by
// drift(code).
// progress names the sale-progress gauges the reconciliation sets beside the drift; the
// backend's metrics test (backend/app) checks them.
var progress = map[string]bool{"vouchergate_voucher_uses_left": true, "vouchergate_voucher_total_limit": true}

func (e *env) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatalf("gather the jobs' metrics: %v", err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if progress[f.GetName()] {
			continue
		}
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetValue() + "}"
			}
			got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue() // one of them is nil: 0
		}
	}
	return got
}

// checkMetrics fails the test unless the jobs' metrics are exactly want, where a counter want
// leaves out is to be 0.
func (e *env) checkMetrics(t *testing.T, want map[string]float64) {
	t.Helper()
	full := map[string]float64{expired: 0, released: 0, putBack: 0, warmed: 0, forgotten: 0}
	for name, v := range want {
		full[name] = v
	}
	got := e.metrics(t)
	if fmt.Sprint(got) != fmt.Sprint(full) { // fmt prints maps sorted by key
		t.Errorf("metrics %v; want %v", got, full)
	}
}

// recordingStore is a real store that counts the calls the jobs begin their runs with, and
// fails the calls a test picks. Each run of a job begins with one store call: ExpireHolds for
// expiry, FlashVouchers for reconciliation of all codes and for warm-up; counting those counts
// runs.
type recordingStore struct {
	voucher.Store
	clock *testkit.ManualClock

	mu    sync.Mutex
	calls map[string]int
	fault func(ctx context.Context, call string, n int) error // nil: every call goes through
}

// failWith makes every call go through fault first: an error from it is the call's answer.
// call is "expire", "reconcile", "warmup" or "active CODE"; n counts the calls of that name,
// from 1.
func (s *recordingStore) failWith(fault func(ctx context.Context, call string, n int) error) {
	s.mu.Lock()
	s.fault = fault
	s.mu.Unlock()
}

// count returns how many calls of that name were made.
func (s *recordingStore) count(call string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[call]
}

func (s *recordingStore) enter(ctx context.Context, call string) error {
	s.mu.Lock()
	s.calls[call]++
	n, fault := s.calls[call], s.fault
	s.mu.Unlock()
	if fault == nil {
		return nil
	}
	return fault(ctx, call, n)
}

func (s *recordingStore) ExpireHolds(ctx context.Context, now time.Time, limit int) ([]voucher.Redemption, error) {
	if err := s.enter(ctx, "expire"); err != nil {
		return nil, err
	}
	return s.Store.ExpireHolds(ctx, now, limit)
}

// FlashVouchers tells reconciliation from warm-up by what they ask for: ReconcileAll the
// vouchers that ended within the last day, WarmUpcoming those that have not ended at now.
func (s *recordingStore) FlashVouchers(ctx context.Context, since time.Time) ([]voucher.Voucher, error) {
	call := "warmup"
	if since.Before(s.clock.Now()) {
		call = "reconcile"
	}
	if err := s.enter(ctx, call); err != nil {
		return nil, err
	}
	return s.Store.FlashVouchers(ctx, since)
}

func (s *recordingStore) ActiveRedemptions(ctx context.Context, code string) ([]voucher.Redemption, error) {
	if err := s.enter(ctx, "active "+code); err != nil {
		return nil, err
	}
	return s.Store.ActiveRedemptions(ctx, code)
}

// silent is a Notifier that tells no one: these tests look at what the jobs count, not at
// what the edges hear (the voucher and api tests do).
type silent struct{}

func (silent) SoldOut(string)        {}
func (silent) BackInStock(string)    {}
func (silent) HoldersChanged(string) {}
func (silent) Deleted(string)        {}
func (silent) State(_ context.Context, code string) (events.VoucherState, error) {
	return events.VoucherState{Code: code}, nil
}

// logRecorder is a slog handler that keeps every record. The jobs log without With or groups,
// so it keeps no attributes of its own.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.records = append(l.records, r.Clone())
	l.mu.Unlock()
	return nil
}

// count returns how many records of level were logged with message msg.
func (l *logRecorder) count(level slog.Level, msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		if r.Level == level && r.Message == msg {
			n++
		}
	}
	return n
}

// warnings returns the attributes, as text, of every warning logged with message msg.
func (l *logRecorder) warnings(msg string) []map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var found []map[string]string
	for _, r := range l.records {
		if r.Level != slog.LevelWarn || r.Message != msg {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
		found = append(found, attrs)
	}
	return found
}
