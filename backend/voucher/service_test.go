package voucher_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"vouchergate/backend/gate"
	"vouchergate/backend/store"
	"vouchergate/backend/voucher"
	"vouchergate/shared/events"
	"vouchergate/shared/keys"
	"vouchergate/testkit"
)

// env is a voucher service on real stores (its own database and Redis key prefix), with the
// notifications it sent recorded, for tests that force an order of events inside the service.
type env struct {
	svc   *voucher.Service
	store *store.Store
	gate  *gate.Gate
	pool  *pgxpool.Pool
	rdb   *redis.Client
	clock *testkit.OffsetClock
	note  *recorder
	keys  func(code string) keys.Voucher
}

// newEnv builds the service; wrap, if not nil, puts a store of the test's around the real one.
func newEnv(t *testing.T, cfg voucher.Config, wrap func(voucher.Store) voucher.Store) *env {
	return newEnvWith(t, cfg, envOptions{wrapStore: wrap})
}

// envOptions shape an env: where its stores are (its own database and the shared Redis unless
// given) and what the test puts around them.
type envOptions struct {
	dbURL     string
	rdb       *redis.Client
	wrapStore func(voucher.Store) voucher.Store
	wrapGate  func(voucher.Gate) voucher.Gate
}

func newEnvWith(t *testing.T, cfg voucher.Config, o envOptions) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if o.dbURL == "" {
		o.dbURL = testkit.Database(t)
	}
	pool, err := store.Open(ctx, o.dbURL, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if o.rdb == nil {
		o.rdb = testkit.Redis(t)
	}
	prefix := testkit.RedisPrefix(t)
	e := &env{store: store.New(pool), gate: gate.New(o.rdb, prefix), pool: pool, rdb: o.rdb,
		clock: &testkit.OffsetClock{}, note: &recorder{},
		keys: func(code string) keys.Voucher { return keys.ForVoucher(prefix, code) }}
	var st voucher.Store = e.store
	if o.wrapStore != nil {
		st = o.wrapStore(st)
	}
	var g voucher.Gate = e.gate
	if o.wrapGate != nil {
		g = o.wrapGate(g)
	}
	if cfg.Clock == nil {
		cfg.Clock = e.clock
	}
	e.svc = voucher.NewService(st, g, e.note, cfg)
	return e
}

func (e *env) createFlash(t *testing.T, code string, total, perUser int) voucher.Voucher {
	t.Helper()
	v := voucher.Voucher{Code: code, DiscountAmount: 10, TotalLimit: total, PerUserLimit: perUser,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(24 * time.Hour), FlashSale: true}
	if err := e.store.CreateVoucher(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	v, err := e.store.Voucher(context.Background(), code) // as stored: its revision
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// recorder is a Notifier that remembers what it was told, in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) SoldOut(code string)        { r.add("sold out " + code) }
func (r *recorder) BackInStock(code string)    { r.add("back in stock " + code) }
func (r *recorder) HoldersChanged(code string) { r.add("holders changed " + code) }
func (r *recorder) Deleted(code string)        { r.add("deleted " + code) }
func (r *recorder) State(_ context.Context, code string) (events.VoucherState, error) {
	return events.VoucherState{Code: code}, nil
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// since returns what was told after the first n events.
func (r *recorder) since(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events[n:]...)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
