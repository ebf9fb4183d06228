// Package quota limits how often an identity (user id, device id, phone number...) may buy
// items over calendar, rolling and fixed windows: rules in PostgreSQL, cached in each backend;
// counters in Redis (single or Cluster), changed by one Lua call per identity that takes from
// every counter the rules imply or from none, idempotently by the caller's idemKey.
//
// The one ordering rule: a deduct visits identities in the order of (identityType, identity)
// and undoes only steps it holds (took or replayed last), after settling its request, never
// after a failed call (see Deduct); every step and every undo is idempotent, so no lock is
// needed and retries never count twice.
package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"vouchergate/shared/clock"
	"vouchergate/shared/events"
	"vouchergate/shared/httplog"
	"vouchergate/shared/keys"
)

// Config wires a Service; zero values take the defaults noted.
type Config struct {
	Redis redis.UniversalClient // required: a single Redis or a ClusterClient
	DB    *pgxpool.Pool         // required: holds quota_rules
	// NATS tells every backend that rules changed; nil leaves it to the periodic refresh.
	NATS       *nats.Conn
	KeyPrefix  string // Redis key prefix, no braces ("vg:")
	NATSPrefix string // subject prefix ("vouchergate"); changes go to <prefix>.quota.rules
	// IdemTTL is how long an idemKey is remembered: retries answer the first answer and a
	// rollback gives back within it (7 days).
	IdemTTL time.Duration
	// RefreshEvery is how often rules are reloaded even without a NATS message (10s).
	RefreshEvery time.Duration
	// UndoTimeout bounds giving back a refused deduct's steps, which goes on after the
	// request's context ended (2s).
	UndoTimeout time.Duration
	// Durability says when a write may be answered: at once (the zero value), or once enough
	// replicas acknowledged it (CheckReplicas tells whether the Redis has them).
	Durability Durability
	// AllowEviction lets New start on a Redis whose maxmemory-policy can evict quota keys
	// (VG_QUOTA_EVICTION=allow); CheckEviction still reports it.
	AllowEviction bool
	// RefuseUnruled refuses a deduct or check that no rule covers (ErrNoRules) instead of
	// answering it, counting nothing, with Unruled set.
	RefuseUnruled bool
	// DegradeBackoff is how long, after a quota call found a Redis node unreachable, the deducts
	// of business lines set to whenUnavailable OPEN skip that node, answering degraded at once,
	// before one of them tries it again (1s).
	DegradeBackoff time.Duration
	Clock          clock.Clock // the wall clock
	Log            *slog.Logger
	// Metrics registers the service's counts (Service.Metrics) for /metrics; nil: not exported.
	Metrics prometheus.Registerer
}

// Service deducts, rolls back and reports purchase quotas, and manages their rules. It is safe
// for concurrent use.
type Service struct {
	cfg     Config
	scripts scripts
	store   *ruleStore
	rules   *ruleCache
	subject string
	sub     *nats.Subscription
	stop    context.CancelFunc
	done    chan struct{}
	metrics metrics
	logs    *httplog.Sampler // lines an outage repeats per request (logs.go)
}

// New checks cfg, loads the rules, subscribes to rule changes and starts the periodic
// refresh. Close stops it. With Durability.MinReplicas set it refuses to start unless every
// Redis master answers with that many replicas connected.
func New(ctx context.Context, cfg Config) (*Service, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Service{
		cfg: cfg,
		scripts: scripts{rdb: cfg.Redis, idemTTL: any(msString(cfg.IdemTTL)), cluster: isCluster(cfg.Redis), durability: cfg.Durability,
			breaker: newBreaker(cfg.DegradeBackoff, cfg.Clock)},
		store:   &ruleStore{pool: cfg.DB},
		subject: cfg.NATSPrefix + ".quota.rules",
		done:    make(chan struct{}),
		metrics: newMetrics(),
		logs:    newLogSampler(cfg),
	}
	s.rules = newRuleCache(s.store, cfg.Clock, cfg.Log, &s.metrics)
	if err := s.rules.reload(ctx); err != nil {
		return nil, fmt.Errorf("quota: load rules: %w", err)
	}
	if n := cfg.Durability.MinReplicas; n > 0 {
		if err := CheckReplicas(ctx, cfg.Redis, n); err != nil {
			return nil, err
		}
	}
	switch err := s.CheckEviction(ctx); {
	case errors.Is(err, ErrMayEvict) && !cfg.AllowEviction:
		return nil, err
	case errors.Is(err, ErrMayEvict):
		cfg.Log.Warn("quota: VG_QUOTA_EVICTION=allow: starting on a Redis that may evict quota keys", "err", err)
	case errors.Is(err, ErrEvictionUnknown): // reported by CheckEviction: a managed Redis is served
	case err != nil:
		cfg.Log.Warn("quota: could not read Redis' maxmemory-policy at start; /readyz looks again", "err", err)
	}
	if err := s.scripts.loadScripts(ctx); err != nil {
		cfg.Log.Warn("quota: scripts not loaded yet; they load on first use", "err", err)
	}
	if cfg.NATS != nil {
		sub, err := cfg.NATS.Subscribe(s.subject, func(*nats.Msg) { s.rules.poke() })
		if err != nil {
			return nil, fmt.Errorf("quota: subscribe to %s: %w", s.subject, err)
		}
		s.sub = sub
	}
	if cfg.Metrics != nil {
		cfg.Metrics.MustRegister(s.metrics.collectors()...)
	}
	runCtx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go func() {
		defer close(s.done)
		s.rules.run(runCtx, cfg.RefreshEvery, s.everyRefresh)
	}()
	return s, nil
}

// withDefaults checks cfg and returns it with the defaults in place of zero values.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Redis == nil || cfg.DB == nil {
		return Config{}, fmt.Errorf("quota: Config.Redis and Config.DB are required")
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = "vg:"
	}
	if err := keys.CheckPrefix(cfg.KeyPrefix); err != nil {
		return Config{}, fmt.Errorf("VG_REDIS_PREFIX: %w", err)
	}
	if cfg.NATSPrefix == "" {
		cfg.NATSPrefix = "vouchergate"
	}
	if err := events.CheckPrefix(cfg.NATSPrefix); err != nil {
		return Config{}, fmt.Errorf("VG_NATS_PREFIX: %w", err)
	}
	if cfg.IdemTTL <= 0 {
		cfg.IdemTTL = 7 * 24 * time.Hour
	}
	if cfg.IdemTTL < time.Second {
		return Config{}, fmt.Errorf("VG_QUOTA_IDEM_TTL is %v; expected at least 1s, such as 168h", cfg.IdemTTL)
	}
	if cfg.RefreshEvery <= 0 {
		cfg.RefreshEvery = 10 * time.Second
	}
	if cfg.UndoTimeout <= 0 {
		cfg.UndoTimeout = 2 * time.Second
	}
	if cfg.DegradeBackoff <= 0 {
		cfg.DegradeBackoff = time.Second
	}
	if cfg.Durability.MinReplicas > 0 && cfg.Durability.Wait <= 0 {
		cfg.Durability.Wait = 250 * time.Millisecond
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return cfg, nil
}

// msString is d in milliseconds, as the scripts take a TTL.
func msString(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// isCluster tells whether keys of different hash tags may live on different nodes.
func isCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// Close stops listening for rule changes and the refresh. It leaves the clients open.
func (s *Service) Close() {
	if s.sub != nil {
		_ = s.sub.Unsubscribe()
	}
	s.stop()
	<-s.done
}
