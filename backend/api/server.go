// Package api is the backend's one HTTP layer, on fasthttp: it routes every path (vouchers,
// purchase quotas, admin), decodes and checks requests with one toolkit (decode.go), calls the
// voucher and quota services, and answers their outcomes from one table (outcomes.go).
package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

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
	Vouchers       *voucher.Service    // nil: voucher paths answer 404
	Quotas         *quota.Service      // nil: quota paths answer 404
	AdminToken     string              // empty: the admin API answers 403
	RequestTimeout time.Duration       // bound on one voucher request's work (5s)
	DBTimeout      time.Duration       // bound on a quota rule call's PostgreSQL work (2s)
	MaxBodyBytes   int                 // larger bodies get 413 PAYLOAD_TOO_LARGE (8192)
	ReadBufferSize int                 // the largest request header read, request line included (fasthttp's 4096)
	Jobs           Jobs                // nil: /admin/expire and /admin/reconcile answer 404
	Metrics        prometheus.Gatherer // nil: /metrics answers 404
	Log            *slog.Logger
}

// Server serves the backend API. It is safe for concurrent use.
type Server struct {
	vouchers *voucher.Service
	quotas   *quota.Service
	opts     Options
	log      *slog.Logger
	metrics  fasthttp.RequestHandler
	// readDeduct reads a deduct body: readDeduct, or encoding/json where a benchmark compares.
	readDeduct func([]byte, *wire.QuotaDeductRequest) error
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
	s := &Server{vouchers: opts.Vouchers, quotas: opts.Quotas, opts: opts, log: opts.Log, readDeduct: readDeduct}
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

// context bounds one request's work.
func (s *Server) context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.RequestTimeout)
}

// Handle routes a request.
func (s *Server) Handle(ctx *fasthttp.RequestCtx) {
	path := ctx.Path()
	if len(path) < 2 || path[0] != '/' {
		notFound(ctx)
		return
	}
	if len(ctx.PostBody()) > s.opts.MaxBodyBytes {
		// HTTPServer refuses these before they get here; a caller of Handle may not
		s.tooLarge(ctx)
		return
	}
	seg := bytes.Split(path[1:], []byte{'/'})
	switch string(seg[0]) {
	case "healthz":
		if len(seg) == 1 && allow(ctx, "GET") {
			respondJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ok"})
		} else if len(seg) != 1 {
			notFound(ctx)
		}
	case "metrics":
		if len(seg) == 1 && s.metrics != nil && allow(ctx, "GET") {
			s.metrics(ctx)
		} else if len(seg) != 1 || s.metrics == nil {
			notFound(ctx)
		}
	case "vouchers":
		s.routeVouchers(ctx, seg[1:])
	case "quotas":
		s.routeQuotas(ctx, seg[1:])
	case "admin":
		if s.authorized(ctx) {
			s.routeAdmin(ctx, seg[1:])
		}
	default:
		notFound(ctx)
	}
}

// routeVouchers routes /vouchers/{code}/...
func (s *Server) routeVouchers(ctx *fasthttp.RequestCtx, seg [][]byte) {
	if len(seg) < 2 || s.vouchers == nil {
		notFound(ctx)
		return
	}
	code, ok := voucherCode(ctx, seg[0])
	if !ok {
		return
	}
	switch {
	case len(seg) == 2 && string(seg[1]) == "reservations":
		if allow(ctx, "POST") {
			s.reserve(ctx, code)
		}
	case len(seg) == 2 && string(seg[1]) == "state":
		if allow(ctx, "GET") {
			s.state(ctx, code)
		}
	case len(seg) == 3 && string(seg[1]) == "reservations":
		if allow(ctx, "DELETE") {
			s.release(ctx, code, string(seg[2]))
		}
	case len(seg) == 4 && string(seg[1]) == "reservations" && string(seg[3]) == "confirm":
		if allow(ctx, "POST") {
			s.confirm(ctx, code, string(seg[2]))
		}
	default:
		notFound(ctx)
	}
}

// routeQuotas routes /quotas/...
func (s *Server) routeQuotas(ctx *fasthttp.RequestCtx, seg [][]byte) {
	if s.quotas == nil || len(seg) != 1 {
		notFound(ctx)
		return
	}
	switch string(seg[0]) {
	case "deduct":
		if allow(ctx, "POST") {
			s.deduct(ctx)
		}
	case "rollback":
		if allow(ctx, "POST") {
			s.rollback(ctx)
		}
	case "usage":
		if allow(ctx, "GET") {
			s.usage(ctx)
		}
	default:
		notFound(ctx)
	}
}

// voucherCode reads a voucher code from a path segment, or answers 400 and returns false.
func voucherCode(ctx *fasthttp.RequestCtx, seg []byte) (string, bool) {
	code := string(seg)
	if !wire.ValidCode(code) {
		respondError(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, "voucher code must match ^[A-Z0-9_-]{1,32}$")
		return "", false
	}
	return code, true
}

// allow answers 405 unless the request's method is method.
func allow(ctx *fasthttp.RequestCtx, method string) bool {
	if string(ctx.Method()) == method {
		return true
	}
	ctx.Response.Header.Set("Allow", method)
	respondError(ctx, fasthttp.StatusMethodNotAllowed, wire.CodeMethodNotAllowed, "use "+method)
	return false
}

func notFound(ctx *fasthttp.RequestCtx) {
	respondError(ctx, fasthttp.StatusNotFound, wire.CodeNotFound, "no such path: "+string(ctx.Path()))
}
