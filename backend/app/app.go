// Package app builds the backend from its settings: database (migrated), Redis, NATS, the
// services and the HTTP server. main and the tests both start the backend through it.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"vouchergate/backend/api"
	"vouchergate/backend/apikeys"
	"vouchergate/backend/gate"
	"vouchergate/backend/jobs"
	"vouchergate/backend/notify"
	"vouchergate/backend/quota"
	"vouchergate/backend/store"
	"vouchergate/backend/voucher"
	"vouchergate/shared/clock"
	"vouchergate/shared/config"
	"vouchergate/shared/drain"
	"vouchergate/shared/events"
	"vouchergate/shared/keys"
)

// App is a running backend's parts. Close releases them.
type App struct {
	Config   config.Backend
	Pool     *pgxpool.Pool
	Redis    redis.UniversalClient
	NATS     *nats.Conn
	Vouchers *voucher.Service
	Store    *store.Store
	Gate     *gate.Gate

	Quotas  *quota.Service
	Jobs    *jobs.Jobs
	Metrics *prometheus.Registry
	API     *api.Server      // the HTTP API; tests call its Handle in memory
	Keys    *apikeys.Keyring // the service API keys; nil when VG_API_KEYS_FILE is not set (keys.go)

	notifier *notify.Notifier
	http     *fasthttp.Server
	ops      *fasthttp.Server // /healthz, /readyz and /metrics, on the ops listener (VG_BACKEND_OPS_ADDR)
	log      *slog.Logger
	stop     context.CancelFunc // ends the jobs
	jobsDone <-chan struct{}    // closed once they have returned
	closed   atomic.Bool
	slotMap  *slotMapReloader             // a Redis Cluster client's; nil for a single Redis
	serving  atomic.Pointer[drain.Server] // the server as Serve runs it, for a drained shutdown (shutdown.go)
}

// Option changes how New builds the app (tests inject a clock).
type Option func(*options)

type options struct {
	clock clock.Clock // nil: the wall clock
}

// WithClock makes the services, vouchers and quotas alike, tell time from clock.
func WithClock(c clock.Clock) Option {
	return func(o *options) { o.clock = c }
}

// New connects to the stores, applies migrations and builds the server. It fails if the
// database cannot be reached; Redis and NATS may come later, except that with
// VG_QUOTA_DURABILITY=replicated Redis must answer, to count its replicas.
func New(ctx context.Context, cfg config.Backend, opts ...Option) (*App, error) {
	if err := keys.CheckPrefix(cfg.RedisPrefix); err != nil {
		return nil, fmt.Errorf("VG_REDIS_PREFIX: %w", err)
	}
	if err := events.CheckPrefix(cfg.NATSPrefix); err != nil {
		return nil, fmt.Errorf("VG_NATS_PREFIX: %w", err)
	}
	a := &App{Config: cfg, log: cfg.Logger(os.Stderr)}
	ok := false
	defer func() {
		if !ok {
			a.Close()
		}
	}()

	var err error
	useRedisLog(a.log)                   // go-redis' own reports, through slog (logs.go)
	a.Metrics = prometheus.NewRegistry() // what /metrics serves (observe.go, the services, the jobs)
	if err := a.openKeys(); err != nil {
		return nil, err
	}
	if a.Pool, err = store.OpenTraced(ctx, cfg.DatabaseURL, int32(cfg.DBMaxConns), int32(cfg.DBWarm()), newPostgresCalls(a.Metrics, a.log)); err != nil {
		return nil, err
	}
	if err := store.Migrate(ctx, a.Pool); err != nil {
		return nil, fmt.Errorf("start backend: %w", err)
	}
	if a.Redis, a.slotMap, err = openRedis(cfg); err != nil {
		return nil, err
	}
	if a.NATS, err = openNATS(cfg, a); err != nil {
		return nil, err
	}
	a.Store = store.New(a.Pool)
	a.Gate = gate.New(a.Redis, cfg.RedisPrefix)
	if a.notifier, err = notify.New(a.NATS, events.Names{Prefix: cfg.NATSPrefix}, cfg.NATSReplicas, a.Gate, cfg.SoldOutEvery, a.log); err != nil {
		return nil, err
	}
	probes := a.observe()
	vcfg, qcfg := a.serviceConfigs(opts)
	a.Vouchers = voucher.NewService(a.Store, a.Gate, a.notifier, vcfg)
	if a.slotMap != nil {
		suspect := a.Vouchers.SuspectGate
		a.slotMap.onStale.Store(&suspect) // a lost master may have lost the gate's last writes
	}
	a.Jobs = jobs.New(a.Vouchers, jobs.Settings{
		ExpireEvery: cfg.ExpireEvery, ReconcileEvery: cfg.ReconcileEvery,
		WarmupEvery: cfg.WarmupEvery, WarmupAhead: cfg.WarmupAhead, ForgetAfter: cfg.FlashKeysKeep,
		Reconcile: voucher.ReconcileConfig{Grace: cfg.ReconcileGrace, DriftAlert: cfg.DriftAlert},
	}, a.Metrics, a.log)
	if a.Quotas, err = quota.New(ctx, qcfg); err != nil {
		return nil, fmt.Errorf("start backend: %w", err)
	}
	// reported at start by quota.New, then on every /readyz; required unless allowed
	probes = append(probes, api.Probe{Name: "redis_eviction", Required: !cfg.AllowQuotaEviction(), Check: a.Quotas.CheckEviction,
		ReportOnly: func(err error) bool { return errors.Is(err, quota.ErrEvictionUnknown) }}) // CONFIG disabled: managed Redis
	quotaOps, err := cfg.QuotaOpMapping()
	if err != nil {
		return nil, err
	}
	a.API = api.New(api.Options{Vouchers: a.Vouchers, Quotas: a.Quotas, AdminToken: cfg.AdminToken, Keys: a.Keys,
		RequestTimeout: cfg.RequestTimeout, DBTimeout: cfg.DBTimeout, MaxBodyBytes: cfg.MaxBodyBytes,
		Jobs: a.Jobs, Metrics: a.Metrics, Registerer: a.Metrics, Probes: probes, Log: a.log,
		ReadBufferSize: config.HeaderLimit(cfg.MaxHeaderBytes).Forwarded(), QuotaOps: quotaOps})
	a.http = a.API.HTTPServer()
	a.ops = a.API.OpsHTTPServer()
	jobsCtx, stop := context.WithCancel(context.Background())
	a.stop = stop
	a.jobsDone = a.Jobs.Run(jobsCtx)
	a.watchKeys(jobsCtx)
	a.warm(ctx)
	ok = true
	return a, nil
}

// serviceConfigs returns the settings of the voucher and quota services.
func (a *App) serviceConfigs(opts []Option) (voucher.Config, quota.Config) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg := a.Config
	vcfg := voucher.Config{HoldTTL: cfg.HoldTTL, DBTimeout: cfg.DBTimeout, InFlightWait: cfg.InFlightWait, MaxClockSkew: cfg.MaxClockSkew, Log: a.log,
		Metrics: a.Metrics}
	qcfg := quota.Config{Redis: a.Redis, DB: a.Pool, NATS: a.NATS,
		KeyPrefix: cfg.RedisPrefix, NATSPrefix: cfg.NATSPrefix, IdemTTL: cfg.QuotaIdemTTL,
		RefreshEvery: cfg.QuotaRefreshEvery, Metrics: a.Metrics, Log: a.log,
		Durability:    quota.Durability{MinReplicas: cfg.QuotaReplicas(), Wait: cfg.QuotaWaitTimeout},
		AllowEviction: cfg.AllowQuotaEviction(), DegradeBackoff: cfg.QuotaDegradeBackoff, RefuseUnruled: cfg.RefuseUnruledQuotas()}
	if o.clock != nil {
		vcfg.Clock, qcfg.Clock = o.clock, o.clock
	}
	return vcfg, qcfg
}

// A burst of flash requests should wait on Redis itself (single-threaded, ~10 µs a script),
// not on the client's pool, nor dial 128 connections at once when the sale opens.
const (
	redisPoolSize = 128
	redisIdle     = 16
)

// dialTimeout is at least a second: a stopped Redis refuses at once, and a burst of dials on a
// busy machine should not fail on a tight bound meant for answers.
func dialTimeout(cfg config.Backend) time.Duration { return max(time.Second, cfg.RedisTimeout) }

func openRedis(cfg config.Backend) (redis.UniversalClient, *slotMapReloader, error) {
	// No automatic retries: a script retried after a timeout may run twice, and a dead Redis
	// must give a quick 503, not a pile-up. No CLIENT SETINFO on connect (DisableIdentity):
	// Redis before 7.2 answers it with an error, counted as a failed command on every new
	// connection.
	if len(cfg.RedisClusterAddrs) > 0 {
		c := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: cfg.RedisClusterAddrs, DialTimeout: dialTimeout(cfg), ReadTimeout: cfg.RedisTimeout,
			WriteTimeout: cfg.RedisTimeout, PoolTimeout: 3 * cfg.RedisTimeout, PoolSize: redisPoolSize,
			MinIdleConns: redisIdle, MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: 50 * time.Millisecond,
			Protocol: redisProtocol, DisableIdentity: true,
		})
		r := newSlotMapReloader(c)
		c.AddHook(r) // a failed master's slots move in a second, not a minute
		return c, r, nil
	}
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("VG_REDIS_URL is invalid; expected redis://host:port/db: %w", err)
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = dialTimeout(cfg), cfg.RedisTimeout, cfg.RedisTimeout
	opts.PoolTimeout, opts.PoolSize, opts.MinIdleConns = 3*cfg.RedisTimeout, redisPoolSize, redisIdle
	opts.MaxRetries, opts.Protocol, opts.DisableIdentity = -1, redisProtocol, true
	opts.DialerRetries, opts.DialerRetryTimeout = 1, 50*time.Millisecond
	return redis.NewClient(opts), nil, nil
}

// redisProtocol is RESP2: with RESP3 go-redis looks for push notifications around every
// command, 8% of the flash path's CPU, and nothing here subscribes to any.
const redisProtocol = 2

func openNATS(cfg config.Backend, a *App) (*nats.Conn, error) {
	nc, err := nats.Connect(cfg.NATSURL,
		nats.Name("vouchergate-backend"),
		nats.RetryOnFailedConnect(true), // start without NATS; edges resync when it comes
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.ReconnectHandler(func(*nats.Conn) {
			if a.notifier != nil {
				a.notifier.Resync()
			}
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("VG_NATS_URL=%s: connect: %w", cfg.NATSURL, err)
	}
	return nc, nil
}

// Serve answers HTTP on ln until Close, which stops accepting on ln first (shutdown.go).
func (a *App) Serve(ln net.Listener) error {
	d := drain.New(a.http)
	a.serving.Store(d)
	return d.Serve(ln)
}

// ServeOps answers the ops paths (/healthz, /readyz, /metrics) on ln until Close.
func (a *App) ServeOps(ln net.Listener) error { return a.ops.Serve(ln) }

// ServeListeners answers HTTP on l's API listener, and the ops paths on its ops listener if
// it has one, until Close.
func (a *App) ServeListeners(l *Listeners) error {
	errc := make(chan error, 2)
	if l.Ops != nil {
		go func() { errc <- a.ServeOps(l.Ops) }()
	}
	a.log.Info("backend listening", "addr", a.Config.Addr, "ops", a.Config.OpsAddr)
	go func() { errc <- a.Serve(l.API) }()
	return <-errc
}

// Close shuts the backend down within the shutdown grace, in order: it stops accepting, lets
// the requests in flight finish (shutdown.go), waits for the voucher service's reservations in
// flight, then stops the jobs, the notifier and the quota service and closes NATS, Redis and
// the pool. Closing again does nothing.
func (a *App) Close() error {
	if a.closed.Swap(true) {
		return nil
	}
	start := time.Now()
	grace := a.Config.ShutdownGrace
	if grace <= 0 {
		grace = defaultGrace
	}
	if a.http != nil {
		a.log.Info("backend shutting down", "grace", grace)
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	var errs []error
	if a.http != nil {
		errs = append(errs, a.stopServing(ctx))
	}
	if a.ops != nil {
		errs = append(errs, a.ops.ShutdownWithContext(ctx))
	}
	if a.Vouchers != nil {
		errs = append(errs, a.Vouchers.Close(ctx))
	}
	if a.stop != nil {
		a.stop()
		<-a.jobsDone // a run in flight ends before the stores it uses close
	}
	if a.notifier != nil {
		a.notifier.Close()
	}
	if a.Quotas != nil {
		a.Quotas.Close()
	}
	if a.NATS != nil {
		a.NATS.Close()
	}
	if a.Redis != nil {
		errs = append(errs, a.Redis.Close())
	}
	if a.Pool != nil {
		a.Pool.Close()
	}
	err := errors.Join(errs...)
	if a.http != nil {
		a.log.Info("backend shut down", "took", time.Since(start).Round(time.Millisecond), "err", err)
	}
	return err
}
