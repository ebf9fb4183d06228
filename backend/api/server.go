// Package api is the backend's one HTTP layer, on fasthttp: it routes every path (vouchers,
// purchase quotas, admin), decodes and checks requests with one toolkit (decode.go), calls the
// voucher and quota services, and answers their outcomes from one table (outcomes.go).
package api

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"vouchergate/backend/apikeys"
	"vouchergate/backend/quota"
	"vouchergate/backend/voucher"
	"vouchergate/shared/httplog"
	"vouchergate/shared/metrics"
	"vouchergate/shared/wire"
)

// Jobs runs the periodic work on demand, for the admin API.
type Jobs interface {
	Expire(ctx context.Context) (int, error)
	Reconcile(ctx context.Context, code string) ([]voucher.Reconciliation, error)
}

// Options configure a Server; zero values take the defaults noted.
type Options struct {
	Vouchers       *voucher.Service      // nil: voucher paths answer 404
	Quotas         *quota.Service        // nil: quota paths answer 404
	AdminToken     string                // empty: the admin API answers 403
	Keys           *apikeys.Keyring      // the service API keys public routes need (keys.go); nil: none needed
	RequestTimeout time.Duration         // bound on one voucher request's work (5s)
	DBTimeout      time.Duration         // bound on a quota rule call's PostgreSQL work (2s)
	MaxBodyBytes   int                   // larger bodies get 413 PAYLOAD_TOO_LARGE (8192)
	ReadBufferSize int                   // the largest request header read, request line included (fasthttp's 4096)
	Jobs           Jobs                  // nil: /admin/expire and /admin/reconcile answer 404
	Metrics        prometheus.Gatherer   // served at the ops listener's /metrics (ops.go); nil: 404
	Registerer     prometheus.Registerer // takes the request counts and latencies; nil: not exported
	Probes         []Probe               // what /readyz checks (ready.go)
	Log            *slog.Logger
	// QuotaOps maps POST /quotas/ops's opType and userInfoType (quota_ops.go); zero: the
	// defaults, wire.DefaultQuotaOpMapping.
	QuotaOps wire.QuotaOpMapping
}

// Server serves the backend API. It is safe for concurrent use.
type Server struct {
	vouchers *voucher.Service
	quotas   *quota.Service
	opts     Options
	log      *slog.Logger
	metrics  fasthttp.RequestHandler
	counts   httpMetrics
	refusals keyRefusals
	// readDeduct reads a deduct body: readDeduct, or encoding/json where a benchmark compares.
	readDeduct func([]byte, *wire.QuotaDeductRequest) error
	draining   atomic.Bool // Drain was called
	// failures lets respondOutcome's "request failed" through once a second per kind, with
	// how many it left out: during an outage every request fails, and each line would be the same
	failures *httplog.Sampler
}

// New returns a server for the services in opts.
func New(opts Options) *Server {
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 5 * time.Second
	}
	if opts.DBTimeout <= 0 {
		opts.DBTimeout = 2 * time.Second
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 8192
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.QuotaOps.OpTypes == nil {
		opts.QuotaOps = wire.DefaultQuotaOpMapping()
	}
	s := &Server{vouchers: opts.Vouchers, quotas: opts.Quotas, opts: opts, log: opts.Log, readDeduct: readDeduct,
		counts: newHTTPMetrics(opts.Registerer), refusals: newKeyRefusals(opts.Registerer),
		failures: httplog.NewSampler(httplog.Every, nil)}
	if opts.Metrics != nil {
		s.metrics = metrics.Handler(opts.Metrics)
	}
	return s
}

// HTTPServer returns a fasthttp server for the API, refusing bodies over MaxBodyBytes. What
// fasthttp reports goes to the log without the request's bytes (an admin token sent straight to
// the backend among them), at most one line a second for each kind (httplog).
func (s *Server) HTTPServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:            s.Handle,
		Name:               "vouchergate-backend",
		MaxRequestBodySize: s.opts.MaxBodyBytes,
		ReadBufferSize:     s.opts.ReadBufferSize, // what the edge forwards: config.HeaderLimit.Forwarded
		ReadTimeout:        10 * time.Second,
		WriteTimeout:       10 * time.Second,
		IdleTimeout:        60 * time.Second,
		ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
			if errors.Is(err, fasthttp.ErrBodyTooLarge) {
				s.tooLarge(ctx)
				return
			}
			respondError(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, "malformed HTTP request")
		},
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		Logger:                httplog.New(s.log, httplog.Every, nil),
		SecureErrorLogMessage: true,
	}
}

// Drain marks the server as shutting down: /readyz answers 503, so a load balancer stops
// sending. Requests are still served.
func (s *Server) Drain() { s.draining.Store(true) }

// context bounds one request's work.
func (s *Server) context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.RequestTimeout)
}

// Handle routes a request (routes.go), checks its service API key (keys.go) and counts it under
// its route (metrics.go).
func (s *Server) Handle(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	name := s.serve(ctx)
	s.counts.observe(ctx, name, start)
}

// serve answers the request and returns the name of its route.
func (s *Server) serve(ctx *fasthttp.RequestCtx) string {
	seg, ok := splitPath(ctx.Path())
	if !ok {
		notFound(ctx)
		return routeNotFound
	}
	if string(seg[0]) == "admin" && !s.authorized(ctx) {
		return "admin_unauthorized"
	}
	e, allowed, p := s.route(ctx.Method(), seg)
	p.code = wire.CanonicalCode(p.code) // "flash100" names FLASH100 on every route
	switch {
	case e == nil && len(allowed) == 0:
		notFound(ctx)
		return routeNotFound
	case e == nil:
		ctx.Response.Header.Set("Allow", strings.Join(allowed, ", "))
		respondError(ctx, fasthttp.StatusMethodNotAllowed, wire.CodeMethodNotAllowed, "use "+strings.Join(allowed, " or "))
		return routeBadMethod
	case !s.permit(ctx, e, &p): // refused for its service API key or X-VG-Subject, answered by permit
	case len(ctx.PostBody()) > s.opts.MaxBodyBytes:
		// HTTPServer refuses these before they get here; a caller of Handle may not
		s.tooLarge(ctx)
	case e.hasCode && !wire.ValidCode(p.code):
		respondError(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, "voucher code must match ^[A-Za-z0-9_-]{1,32}$")
	default:
		e.handle(s, ctx, p)
	}
	return e.name
}

func notFound(ctx *fasthttp.RequestCtx) {
	respondError(ctx, fasthttp.StatusNotFound, wire.CodeNotFound, "no such path: "+string(ctx.Path()))
}
