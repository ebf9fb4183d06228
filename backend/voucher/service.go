package voucher

import (
	"context"
	"fmt"
	"log/slog"

	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"vouchergate/shared/clock"
	"vouchergate/shared/events"
	"vouchergate/shared/httplog"
)

// Config tunes the service; zero values take the defaults noted.
type Config struct {
	HoldTTL      time.Duration // how long a reservation is held unless confirmed (15m)
	DBTimeout    time.Duration // bound on one database write after the gate said yes (2s)
	InFlightWait time.Duration // how long a retry waits for its first attempt's outcome (1s)
	MaxClockSkew time.Duration // the most two backends' clocks may disagree (0: none)
	Clock        clock.Clock   // the wall clock
	Log          *slog.Logger
	Metrics      prometheus.Registerer // takes the flash path's numbers (metrics.go); nil: not exported
}

// Service reserves, confirms and releases voucher uses. It is safe for concurrent use.
type Service struct {
	store  Store
	views  Views // the store's, if it has them; nil: the admin lists answer ErrUnavailable
	gate   Gate  // nil: flash vouchers answer ErrUnavailable
	notify Notifier
	cfg    Config

	vouchers sync.Map // code -> cachedVoucher: each backend's copy, read again after voucherFresh
	loads    singleflight.Group
	// rereads are the cache's reads of a voucher whose copy went stale: one at a time per
	// voucher, shared by every request that finds the copy stale meanwhile
	rereads  singleflight.Group
	writers  sync.Map // code -> *writer, one per flash voucher written by this process
	flights  flights  // flash reservations in flight, that their retries wait for (flights.go)
	written  batchCounts
	counts   serviceMetrics
	repeated *httplog.Sampler // the lines each failing request writes alike (log.go)

	inFlight     atomic.Int64 // reservations and releases not returned yet (drain.go)
	suspectSince atomic.Int64 // when the gate became suspect (suspect.go); 0: trusted
	suspectCodes sync.Map     // voucher code -> when it alone became suspect (suspect.go)
	closing      atomic.Bool  // Close was called: new ones are refused
}

// NewService returns a service over store and gate, telling notify about sold-out state. The
// admin lists are read from store when it implements Views.
func NewService(store Store, gate Gate, notify Notifier, cfg Config) *Service {
	if cfg.HoldTTL <= 0 {
		cfg.HoldTTL = 15 * time.Minute
	}
	if cfg.DBTimeout <= 0 {
		cfg.DBTimeout = 2 * time.Second
	}
	if cfg.InFlightWait <= 0 {
		cfg.InFlightWait = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Service{store: store, views: viewsOf(store), gate: gate, notify: notify, cfg: cfg,
		counts: newServiceMetrics(cfg.Metrics), repeated: httplog.NewSampler(httplog.Every, nil)}
}

// HoldTTL is how long a reservation is held unless confirmed, for a voucher without its own.
func (s *Service) HoldTTL() time.Duration { return s.cfg.HoldTTL }

// batchCounts counts the flash writers' transactions and the holds they carried.
type batchCounts struct{ batches, holds atomic.Int64 }

// WriteBatches returns how many batches this process's flash writers sent to the database and
// how many holds they carried: holds/batches is the mean batch size.
func (s *Service) WriteBatches() (batches, holds int64) {
	return s.written.batches.Load(), s.written.holds.Load()
}

// voucherFresh is how long a backend answers from its copy of a voucher before reading it
// again. Reservations do not depend on it: a flash reservation's gate and a normal one's
// lookup both name the revision they hold, and one made with an older copy is decided again
// with the voucher read anew (reserve.go). What it bounds is a refusal from an old copy (an
// edit on another backend extended the period a second ago) and a dry run's answer.
const voucherFresh = time.Second

// cachedVoucher is a backend's copy of a voucher and when it was read, by the monotonic clock
// (how old a copy is has nothing to do with the business clock).
type cachedVoucher struct {
	v  Voucher
	at time.Time
}

// voucher returns the voucher from the cache while its copy is fresh, else from the store.
func (s *Service) voucher(ctx context.Context, code string) (Voucher, error) {
	if c, ok := s.vouchers.Load(code); ok && time.Since(c.(cachedVoucher).at) < voucherFresh {
		return c.(cachedVoucher).v, nil
	}
	// A sale's crowd finds the copy stale all at once: each request reading the voucher itself
	// would take a pooled connection, growing the pool (a forked server each) as the sale opens.
	// The read is the first finder's, cut loose from its request so that one request giving up
	// does not fail the others.
	read := s.rereads.DoChan(code, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.DBTimeout)
		defer cancel()
		return s.freshVoucher(rctx, code)
	})
	select {
	case r := <-read:
		if r.Err != nil {
			return Voucher{}, r.Err
		}
		return r.Val.(Voucher), nil
	case <-ctx.Done():
		return Voucher{}, fmt.Errorf("read voucher %s: %w", code, ctx.Err())
	}
}

// freshVoucher reads the voucher from the store and keeps the copy.
func (s *Service) freshVoucher(ctx context.Context, code string) (Voucher, error) {
	v, err := s.store.Voucher(ctx, code)
	if errors.Is(err, ErrVoucherNotFound) {
		s.vouchers.Delete(code)
	}
	if err != nil {
		return Voucher{}, err
	}
	s.remember(v)
	return v, nil
}

// remember keeps v as this backend's copy of its voucher, unless a newer revision is kept (two
// reads finishing out of order).
func (s *Service) remember(v Voucher) {
	fresh := cachedVoucher{v: v, at: time.Now()}
	for {
		old, loaded := s.vouchers.LoadOrStore(v.Code, fresh)
		if !loaded {
			return
		}
		if old.(cachedVoucher).v.Revision > v.Revision || s.vouchers.CompareAndSwap(v.Code, old, fresh) {
			return
		}
	}
}

// Create stores a new voucher and, for a flash voucher, loads it into the gate.
func (s *Service) Create(ctx context.Context, v Voucher) error {
	if err := s.store.CreateVoucher(ctx, v); err != nil {
		return err
	}
	s.counts.showLimit(v)
	if v.FlashSale && s.gate != nil {
		// Keys under the code are a deleted voucher's, whose Delete could not remove them: the
		// new one has no redemption, so they hold nothing of it.
		if _, err := s.gate.Forget(ctx, v.Code); err != nil {
			s.cfg.Log.Warn("drop redis keys left under a new voucher's code", "code", v.Code, "err", err)
		}
		if err := s.Warm(ctx, v.Code); err != nil {
			// the first reservation loads it; the voucher exists either way
			s.cfg.Log.Warn("load new flash voucher into redis", "code", v.Code, "err", err)
		}
	}
	return nil
}

// Warm loads a flash voucher into the gate from its active redemptions, unless it is loaded.
// Concurrent calls in this process share one load; across processes the gate's load is atomic.
func (s *Service) Warm(ctx context.Context, code string) error {
	v, err := s.freshVoucher(ctx, code) // the definition the load gives the gate
	if err != nil {
		return err
	}
	if !v.FlashSale {
		return nil
	}
	if s.gate == nil {
		return fmt.Errorf("warm %s: no redis gate: %w", code, ErrUnavailable)
	}
	s.counts.showLimit(v)
	_, err, _ = s.loads.Do(code, func() (any, error) { return nil, s.load(ctx, v) })
	return err
}

// load is Warm's one load: read the active rows, load them, read them again.
func (s *Service) load(ctx context.Context, v Voucher) error {
	code := v.Code
	active, err := s.store.ActiveRedemptions(ctx, code)
	if err != nil {
		return fmt.Errorf("warm %s: read active redemptions: %w", code, err)
	}
	remaining, err := s.gate.Load(ctx, v, active)
	if err != nil {
		return fmt.Errorf("warm %s: load redis: %w", code, err)
	}
	// A write that committed between the read and the load is not in it; read again, now
	// that the load is done (a write committing later puts its own order back: keepHeld).
	again, err := s.store.ActiveRedemptions(ctx, code)
	if err != nil {
		return fmt.Errorf("warm %s: read active redemptions again: %w", code, err)
	}
	s.keepHeld(ctx, code, again)
	// A release that committed between the read and the load found nothing to give back in
	// Redis, and the load then wrote its order in: give back what the load held for it (a
	// release committing later gives it back on its own).
	remaining += s.giveBackLoaded(ctx, code, releasedSince(active, again))
	// The state before the load is unknown (Redis may have lost a sell-out or a release):
	// say what it is now.
	if remaining <= 0 { // below zero: a put-back took a use Redis had sold again
		s.notify.SoldOut(code)
	} else {
		s.notify.BackInStock(code)
	}
	return nil
}

// releasedSince returns the rows of before that are not in after, both reads of one voucher's
// active rows: those released in between (a row never becomes active again).
func releasedSince(before, after []Redemption) []Redemption {
	still := make(map[string]bool, len(after))
	for _, r := range after {
		still[r.OrderID] = true
	}
	var gone []Redemption
	for _, r := range before {
		if !still[r.OrderID] {
			gone = append(gone, r)
		}
	}
	return gone
}

// Stats returns the voucher with its counts and, for a flash voucher, Redis's remaining uses.
func (s *Service) Stats(ctx context.Context, code string) (Usage, error) {
	st, err := s.store.Stats(ctx, code)
	if err != nil || !st.FlashSale || s.gate == nil {
		return st, err
	}
	if n, loaded, err := s.gate.Remaining(ctx, code); err == nil && loaded {
		st.RedisRemaining = &n
	}
	return st, nil
}

// SoldOutState is the voucher's sold-out state with its holders, read now: what an edge that
// learned of a sell-out from a passing 409 while NATS was away asks for.
func (s *Service) SoldOutState(ctx context.Context, code string) (events.VoucherState, error) {
	st, err := s.notify.State(ctx, code)
	if err != nil {
		return st, s.unavailable(err, "read sold-out state of %s", code)
	}
	return st, nil
}
