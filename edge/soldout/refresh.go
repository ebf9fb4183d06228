package soldout

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"vouchergate/shared/events"
	"vouchergate/shared/httplog"
)

// Source reads a voucher's state live. Implementations MUST be safe for concurrent use and
// MUST return a sold-out state only with the holders read at or after the sell-out.
type Source interface {
	VoucherState(ctx context.Context, code string) (events.VoucherState, error)
}

// Refresher reads vouchers' states from a Source when asked, at most once per voucher per
// interval and a few at a time, and applies them to a Cache. An ask that comes too soon is
// kept for when the interval has passed, so none is lost. It is how the edge learns a
// sell-out from a 409 passing through (NATS may be down) and keeps a busy entry alive past its
// TTL while the voucher stays sold out.
type Refresher struct {
	cache   *Cache
	src     Source
	every   time.Duration
	timeout time.Duration
	log     *slog.Logger
	warns   *httplog.Sampler // a line a second of each warning: with the backends down every busy voucher's read fails
	now     func() time.Time // time.Now; tests freeze it to hold an ask back as long as they need

	asks chan string
	slot chan struct{} // bounds reads in flight

	mu    sync.Mutex
	last  map[string]time.Time // when a read of code last started
	busy  map[string]bool      // codes being read
	later map[string]bool      // codes planned to be read once the interval has passed

	stop chan struct{}
	done sync.WaitGroup
}

// maxInFlight bounds concurrent reads; asks beyond it are dropped, and a later ask retries.
const maxInFlight = 4

// NewRefresher returns a running Refresher. Each read is bounded by timeout.
func NewRefresher(cache *Cache, src Source, every, timeout time.Duration, log *slog.Logger) *Refresher {
	return newRefresher(cache, src, every, timeout, log, time.Now)
}

func newRefresher(cache *Cache, src Source, every, timeout time.Duration, log *slog.Logger, now func() time.Time) *Refresher {
	r := &Refresher{
		cache: cache, src: src, every: every, timeout: timeout, log: log, now: now,
		asks: make(chan string, 64), slot: make(chan struct{}, maxInFlight),
		last: map[string]time.Time{}, busy: map[string]bool{}, later: map[string]bool{},
		stop: make(chan struct{}), warns: httplog.NewSampler(httplog.Every, nowFunc(now)),
	}
	r.done.Add(1)
	go r.run()
	return r
}

// Ask requests a read of code's state. It never blocks and does not allocate: when the queue
// is full the ask is dropped (a later request asks again).
func (r *Refresher) Ask(code string) {
	select {
	case r.asks <- code:
	default:
	}
}

// Close stops the Refresher and waits for reads in flight.
func (r *Refresher) Close() {
	close(r.stop)
	r.done.Wait()
}

func (r *Refresher) run() {
	defer r.done.Done()
	sweep := time.NewTicker(time.Second)
	defer sweep.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-sweep.C:
			r.cache.Sweep()
			r.forget()
		case code := <-r.asks:
			r.start(code)
		}
	}
}

func (r *Refresher) start(code string) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.busy[code] || r.later[code] {
		return // the read in flight or the one planned will do
	}
	if wait := r.every - now.Sub(r.last[code]); wait > 0 {
		r.planLocked(code, wait)
		return
	}
	select {
	case r.slot <- struct{}{}:
	default:
		r.planLocked(code, r.every)
		return
	}
	r.busy[code] = true
	r.last[code] = now

	r.done.Add(1)
	go func() {
		defer r.done.Done()
		r.read(code)
		<-r.slot
		r.mu.Lock()
		delete(r.busy, code)
		r.mu.Unlock()
	}()
}

// planLocked asks again for code after wait, so that an ask that came too soon is not lost.
func (r *Refresher) planLocked(code string, wait time.Duration) {
	r.later[code] = true
	time.AfterFunc(wait, func() {
		r.mu.Lock()
		delete(r.later, code)
		r.mu.Unlock()
		r.Ask(code)
	})
}

func (r *Refresher) read(code string) {
	version := r.cache.Version(code)
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	go func() { // Close cancels reads in flight
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	s, err := r.src.VoucherState(ctx, code)
	if err != nil {
		r.warn("read voucher state", "code", code, "err", err)
		return
	}
	if s.Code != code {
		r.warn("read voucher state: answer for another voucher", "code", code, "got", s.Code)
		return
	}
	if _, err := r.cache.ApplyIf(s, version); err != nil {
		r.warn("apply voucher state", "code", code, "err", err)
	}
}

// nowFunc is a func telling time as a clock.Clock.
type nowFunc func() time.Time

func (f nowFunc) Now() time.Time { return f() }

// warn logs msg unless a line of it was logged less than a second ago, and says how many it
// left out since.
func (r *Refresher) warn(msg string, args ...any) {
	r.warns.Log(context.Background(), r.log, slog.LevelWarn, msg, msg, args...)
}

// forget drops rate-limit marks older than the interval, so the maps stay small.
func (r *Refresher) forget() {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for code, t := range r.last {
		if now.Sub(t) >= r.every && !r.busy[code] && !r.later[code] {
			delete(r.last, code)
		}
	}
}
