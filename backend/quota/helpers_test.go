package quota_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/nats-io/nats.go"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/redis/go-redis/v9"

	"vouchergate/backend/quota"
	"vouchergate/migrations"
	"vouchergate/testkit"
)

// migratedDB returns a pool on a fresh database with every migration applied.
func migratedDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testkit.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return pool
}

// singleRedis returns a client of the shared Redis.
func singleRedis(t testing.TB) redis.UniversalClient {
	t.Helper()
	opts, err := redis.ParseURL(testkit.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	opts.PoolSize = 64
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func natsConn(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(testkit.NATSURL)
	if err != nil {
		t.Fatalf("connect to NATS at %s (is it running?): %v", testkit.NATSURL, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// env is one backend's quota service on real servers, with a frozen clock.
type env struct {
	svc   *quota.Service
	rdb   redis.UniversalClient
	db    *pgxpool.Pool
	clock *testkit.ManualClock
	cfg   quota.Config
	seq   int // makes fill's idemKeys unique
}

// newEnv starts a service on the shared Redis (or rdb if given) and a fresh database.
func newEnv(t testing.TB, start time.Time, rdb ...redis.UniversalClient) *env {
	t.Helper()
	e := &env{db: migratedDB(t), clock: testkit.NewManualClock(start)}
	if len(rdb) > 0 {
		e.rdb = rdb[0]
	} else {
		e.rdb = singleRedis(t)
	}
	e.cfg = quota.Config{Redis: e.rdb, DB: e.db, KeyPrefix: testkit.RedisPrefix(t),
		NATSPrefix: testkit.NATSPrefix(), Clock: e.clock, IdemTTL: 10 * time.Minute}
	t.Cleanup(func() { testkit.UnlinkPrefix(e.rdb, e.cfg.KeyPrefix) })
	e.svc = e.start(t, e.cfg)
	return e
}

func (e *env) start(t testing.TB, cfg quota.Config) *quota.Service {
	t.Helper()
	svc, err := quota.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc
}

func (e *env) rule(t testing.TB, biz int64, typ, dim string, limit int64, w quota.Window) quota.Rule {
	t.Helper()
	r, _, err := e.svc.PutRule(context.Background(), quota.Rule{BizID: biz, IdentityType: typ, Dimension: dim, Limit: limit, Window: w})
	if err != nil {
		t.Fatalf("put rule: %v", err)
	}
	return r
}

func calendar(t testing.TB, typ quota.WindowType, tz string) quota.Window {
	t.Helper()
	w, err := quota.NewCalendarWindow(typ, tz)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func rolling(t testing.TB, size time.Duration) quota.Window {
	t.Helper()
	w, err := quota.NewRollingWindow(size)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func item(typ, id string, amount int64, dims ...string) quota.Item {
	return quota.Item{IdentityType: typ, Identity: id, Dimensions: dims, Amount: amount}
}

func (e *env) deduct(biz int64, key string, items ...quota.Item) (quota.DeductResult, error) {
	return e.svc.Deduct(context.Background(), biz, key, items)
}

// used returns the counter of dimension dim in window w of an identity, read from Redis.
func (e *env) used(t testing.TB, biz int64, typ, id, dim string, w quota.Window) int64 {
	t.Helper()
	var dims []string
	if dim != "*" {
		dims = []string{dim}
	}
	cs, err := e.svc.Usage(context.Background(), biz, typ, id, dims)
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	for _, c := range cs {
		if c.Dimension == dim && c.Window.ID() == w.ID() {
			return c.Used
		}
	}
	t.Fatalf("no counter %s %s in %+v", dim, w.ID(), cs)
	return 0
}

func mustTime(t testing.TB, layout, s, tz string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(tz)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation(layout, s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
