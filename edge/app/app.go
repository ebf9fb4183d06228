// Package app builds the edge from its settings: the sold-out cache, the NATS listener that
// fills it, the backend pool, the checkout client, the proxy and its HTTP server. main and the
// tests both start the edge through it.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"vouchergate/edge/listen"
	"vouchergate/edge/proxy"
	"vouchergate/edge/soldout"
	"vouchergate/edge/token"
	"vouchergate/edge/upstream"
	"vouchergate/shared/config"
	"vouchergate/shared/drain"
	"vouchergate/shared/events"
	"vouchergate/shared/metrics"
)

// App is a running edge's parts. Close releases them.
type App struct {
	Config    config.Edge
	Cache     *soldout.Cache
	Pool      *upstream.Pool
	Refresher *soldout.Refresher
	Listener  *listen.Listener
	Proxy     *proxy.Proxy
	Metrics   *prometheus.Registry // the proxy's counters and the edge's state, served at /metrics

	server  *fasthttp.Server
	serving *drain.Server      // server, shut down without dropping a request that reached it
	ops     *fasthttp.Server   // /healthz, /readyz in full and /metrics, on cfg.OpsAddr
	upCheck *upstream.Checkout // the checkout API's client, if one is configured
	tokens  *token.Verifier    // shoppers' tokens; nil: off
	tls     *tls.Config        // the public listener's; nil: plain HTTP
	metrics fasthttp.RequestHandler
	log     *slog.Logger
	started time.Time
	closed  atomic.Bool

	idleClosed atomic.Uint64 // idle client connections closed to make room near the cap
}

// Option changes how New builds the edge.
type Option func(*options)

type options struct {
	log *slog.Logger
}

// WithLog sends the edge's log to l.
func WithLog(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// New builds the edge and waits, up to cfg.SyncWait, for the current sold-out set from NATS,
// so that an edge started after a sell-out answers it from its first request. NATS and the
// backends may be down: the edge starts anyway and catches up when they come.
func New(ctx context.Context, cfg config.Edge, opts ...Option) (*App, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	o := options{log: cfg.Logger(os.Stderr)}
	for _, opt := range opts {
		opt(&o)
	}
	a := &App{Config: cfg, log: o.log, started: time.Now()}
	ok := false
	defer func() {
		if !ok {
			a.Close()
		}
	}()

	var err error
	if a.tokens, err = loadTokens(cfg, a.log); err != nil {
		return nil, err
	}
	if a.tls, err = loadTLS(cfg); err != nil {
		return nil, err
	}
	if a.tokens != nil && cfg.APIKey == "" {
		a.log.Warn("shoppers' tokens are checked but VG_EDGE_API_KEY is empty: backend calls carry no service key")
	}
	a.logPublicAccess()
	clientOpts := clientOptions(cfg)
	a.Cache = soldout.New(soldout.Options{TTL: cfg.SoldOutTTL, Keep: cfg.SoldOutKeepFor(), RefreshAfter: cfg.SoldOutRefresh})
	a.Pool = newPool(cfg, clientOpts, a.log)
	a.Refresher = soldout.NewRefresher(a.Cache, a.Pool, cfg.StateEvery, cfg.BackendTimeout, a.log)
	if a.Listener, err = listen.Start(listen.Options{
		URL: cfg.NATSURL, Names: events.Names{Prefix: cfg.NATSPrefix}, Replicas: cfg.NATSReplicas,
		CheckEvery: cfg.StateCheckEvery(),
	}, a.Cache, a.log); err != nil {
		return nil, err
	}
	a.Metrics = prometheus.NewRegistry()
	a.Proxy = proxy.New(a.proxyOptions())
	a.registerMetrics()
	a.metrics = metrics.Handler(a.Metrics)
	a.server = proxy.NewServer(a.Proxy, proxy.ServerOptions{
		ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout,
		MaxHeaderBytes: cfg.MaxHeaderBytes, MaxBodyBytes: cfg.MaxBodyBytes,
	})
	a.serving = drain.New(a.server)
	a.ops = newOpsServer(a.opsLocal, a.log)
	if err = a.waitForSoldOutSet(ctx); err != nil {
		return nil, err
	}
	ok = true
	return a, nil
}

// clientOptions are the settings of every connection to a backend or the checkout API.
func clientOptions(cfg config.Edge) upstream.Options {
	return upstream.Options{
		DialTimeout: cfg.DialTimeout, ConnWait: cfg.ConnWait, MaxConns: cfg.MaxConns,
		MaxHeaderBytes: cfg.MaxHeaderBytes, MaxBodyBytes: backendAnswerBytes,
		// Below the backend's 60 s server idle timeout, so the edge never reuses a connection
		// the server is closing (a request sent on it would be lost with a 502).
		IdleTimeout: min(cfg.IdleTimeout, 10*time.Second),
	}
}

// backendAnswerBytes bounds a backend's answer, read whole: the API's answers are small JSON.
const backendAnswerBytes = 4 << 20

// newPool returns the pool of the configured backends, each checked once.
func newPool(cfg config.Edge, clientOpts upstream.Options, log *slog.Logger) *upstream.Pool {
	addrs, tls := make([]string, len(cfg.Backends)), make([]bool, len(cfg.Backends))
	for i, b := range cfg.Backends {
		addrs[i], tls[i], _ = config.SplitUpstream(b) // checked by cfg.Check
	}
	return upstream.NewPool(addrs, tls, upstream.PoolOptions{
		Client: clientOpts, HealthEvery: cfg.HealthEvery, HealthTimeout: cfg.HealthTimeout, HealthFalls: cfg.HealthFalls,
		APIKey: cfg.APIKey, Warm: cfg.WarmConns,
	}, log)
}

// proxyOptions wires the proxy to the parts built before it, and to the checkout API if one
// is configured.
func (a *App) proxyOptions() proxy.Options {
	cfg := a.Config
	opts := proxy.Options{
		Backends: a.Pool, SoldOut: a.Cache, Refresher: a.Refresher, Local: a.local,
		BackendTimeout: cfg.BackendTimeout, MaxCheckoutAnswer: cfg.MaxRespBytes, WriteIdle: cfg.StreamSendTimeout,
		MaxAPIBodyBytes: cfg.MaxAPIBodyBytes, MaxBodyBytes: cfg.MaxBodyBytes, BodyBudget: cfg.BodyBudgetBytes,
		MaxUpstreamHead: config.HeaderLimit(cfg.MaxHeaderBytes).Forwarded(),
		Metrics:         a.Metrics, Log: a.log,
		ReserveSlots: cfg.ReserveSlots(), ReserveWait: cfg.ReserveWait,
		Tokens: a.tokens, APIKey: cfg.APIKey,
	}
	opts.TrustedProxies, _ = cfg.TrustedProxyPrefixes() // checked by cfg.Check
	if cfg.Upstream != "" {
		a.upCheck = newCheckout(cfg)
		opts.Checkout = a.upCheck
	}
	return opts
}

// newCheckout returns the client of the configured checkout API.
func newCheckout(cfg config.Edge) *upstream.Checkout {
	addr, tls, _ := config.SplitUpstream(cfg.Upstream) // checked by cfg.Check
	timeouts, _ := cfg.PathTimeouts()                  // checked by cfg.Check
	o := upstream.CheckoutOptions{
		DialTimeout: cfg.DialTimeout, ConnWait: cfg.ConnWait, MaxConns: cfg.MaxConns,
		MaxHeaderBytes: cfg.UpstreamMaxHeaderBytes, IdleConn: cfg.UpstreamKeepAlive,
		ProbePath: cfg.UpstreamProbePath, ProbeTimeout: cfg.HealthTimeout,
	}
	for _, t := range timeouts {
		o.Timeouts = append(o.Timeouts, upstream.PathTimeout{Prefix: t.Prefix, ReadIdle: t.Read, Total: t.Total})
	}
	return upstream.NewCheckout(addr, tls, o)
}

// waitForSoldOutSet waits up to SyncWait for the first complete read of the sold-out set from
// NATS; past it, the edge starts anyway. It fails only when ctx ends first.
func (a *App) waitForSoldOutSet(ctx context.Context) error {
	wait := time.NewTimer(a.Config.SyncWait)
	defer wait.Stop()
	select {
	case <-a.Listener.Synced():
	case <-wait.C:
		a.log.Warn("sold-out set not read from NATS yet; starting anyway", "waited", a.Config.SyncWait)
	case <-ctx.Done():
		return fmt.Errorf("start edge: %w", ctx.Err())
	}
	return nil
}

// Serve answers HTTP on ln until Close: HTTP/1.1 over TLS when a certificate is configured.
func (a *App) Serve(ln net.Listener) error {
	if a.tls != nil {
		ln = tls.NewListener(ln, a.tls)
	}
	caps := proxy.Caps{MaxConns: a.Config.MaxClientConns, MaxConnsPerIP: a.Config.MaxConnsPerIP,
		IdleClosed: func() { a.idleClosed.Add(1) }}
	return a.serving.Serve(proxy.ClientListener(ln, caps))
}

// ServeOps answers the ops paths (/healthz, /readyz in full, /metrics) on ln until Close.
func (a *App) ServeOps(ln net.Listener) error { return a.ops.Serve(ln) }

// ListenAndServe answers HTTP on the configured address, and the ops paths on the ops address
// if one is set, until Close. It says "edge listening" only once both are bound.
func (a *App) ListenAndServe() error {
	errc := make(chan error, 2)
	if a.Config.HasOps() {
		ln, err := net.Listen("tcp", a.Config.OpsAddr)
		if err != nil {
			return fmt.Errorf("VG_EDGE_OPS_ADDR=%s: %w", a.Config.OpsAddr, err)
		}
		go func() { errc <- a.ServeOps(ln) }()
	}
	ln, err := net.Listen("tcp", a.Config.Addr)
	if err != nil {
		return fmt.Errorf("VG_EDGE_ADDR=%s: %w", a.Config.Addr, err)
	}
	a.log.Info("edge listening", "addr", a.Config.Addr, "tls", a.tls != nil, "ops", a.Config.OpsAddr, "backends", a.Config.Backends,
		"upstream", a.Config.Upstream, "tokens", a.tokens != nil, "serviceKey", a.Config.APIKey != "")
	go func() { errc <- a.Serve(ln) }()
	return <-errc
}

// Close shuts the edge down within the shutdown grace: it stops accepting and lets the requests
// in flight finish (shared/drain), while /readyz answers 503 on both listeners; then it stops
// the ops listener, the NATS listener, the sold-out refresher and the backend pool, and closes
// the upstream clients' connections. Closing again does nothing.
func (a *App) Close() error {
	if a.closed.Swap(true) {
		return nil
	}
	start := time.Now()
	serving := a.serving != nil
	if serving {
		a.log.Info("edge shutting down", "grace", a.Config.ShutdownGrace)
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.Config.ShutdownGrace)
	defer cancel()
	var errs []error
	if serving {
		if err := a.serving.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop serving: requests still in flight after the grace: %w", err))
		}
	}
	if a.ops != nil {
		errs = append(errs, a.ops.ShutdownWithContext(ctx))
	}
	if a.Listener != nil {
		a.Listener.Close()
	}
	if a.Refresher != nil {
		a.Refresher.Close()
	}
	if a.Pool != nil {
		a.Pool.Close()
	}
	if a.tokens != nil {
		a.tokens.Close()
	}
	if a.upCheck != nil {
		a.upCheck.Close()
	}
	err := errors.Join(errs...)
	if serving {
		a.log.Info("edge shut down", "took", time.Since(start).Round(time.Millisecond), "err", err)
	}
	return err
}
