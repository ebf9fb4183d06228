// Package api is the backend's HTTP API on fasthttp: it routes, decodes and checks requests,
// calls the voucher (and quota) services, and maps their outcomes to the wire contract.
package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"vouchergate/backend/notify"
	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// Quota is the purchase-quota API, routed under /quotas/ and /admin/quota-rules.
type Quota interface {
	Deduct(ctx *fasthttp.RequestCtx)
	Rollback(ctx *fasthttp.RequestCtx)
	Usage(ctx *fasthttp.RequestCtx)
	PutRule(ctx *fasthttp.RequestCtx)
	ListRules(ctx *fasthttp.RequestCtx)
	GetRule(ctx *fasthttp.RequestCtx)
	DeleteRule(ctx *fasthttp.RequestCtx)
}

// Jobs runs the periodic work on demand, for the admin API.
type Jobs interface {
	Expire(ctx context.Context) (int, error)
	Reconcile(ctx context.Context, code string) ([]voucher.Reconciliation, error)
}

// Options configure a Server.
type Options struct {
	AdminToken     string              // empty: the admin API answers 403
	RequestTimeout time.Duration       // bound on one request's work (5s)
	Quota          Quota               // nil: quota paths answer 404
	State          notify.Reader       // nil: /vouchers/{code}/state answers 404
	Jobs           Jobs                // nil: /admin/expire and /admin/reconcile answer 404
	Metrics        prometheus.Gatherer // nil: /metrics answers 404
	Log            *slog.Logger
}

// Server serves the backend API.
type Server struct {
	vouchers *voucher.Service
	opts     Options
	log      *slog.Logger
	metrics  fasthttp.RequestHandler
}

// New returns a server for the voucher service.
func New(vouchers *voucher.Service, opts Options) *Server {
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 5 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	s := &Server{vouchers: vouchers, opts: opts, log: opts.Log}
	if opts.Metrics != nil {
		s.metrics = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(opts.Metrics, promhttp.HandlerOpts{}))
	}
	return s
}

// HTTPServer returns a fasthttp server for the API with a request body limit.
func (s *Server) HTTPServer(maxBody int) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:            s.Handle,
		Name:               "vouchergate-backend",
		MaxRequestBodySize: maxBody,
		ReadTimeout:        10 * time.Second,
		WriteTimeout:       10 * time.Second,
		IdleTimeout:        60 * time.Second,
		ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
			if errors.Is(err, fasthttp.ErrBodyTooLarge) {
				respondError(ctx, fasthttp.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge, "body is larger than the limit")
				return
			}
			respondError(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, "malformed HTTP request")
		},
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
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
	if len(seg) < 2 {
		notFound(ctx)
		return
	}
	code := string(seg[0])
	if !wire.ValidCode(code) {
		respondError(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, "voucher code must match ^[A-Z0-9_-]{1,32}$")
		return
	}
	switch {
	case len(seg) == 2 && string(seg[1]) == "reservations":
		if allow(ctx, "POST") {
			s.reserve(ctx, code)
		}
	case len(seg) == 2 && string(seg[1]) == "state" && s.opts.State != nil:
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

func (s *Server) routeQuotas(ctx *fasthttp.RequestCtx, seg [][]byte) {
	q := s.opts.Quota
	if q == nil || len(seg) != 1 {
		notFound(ctx)
		return
	}
	switch string(seg[0]) {
	case "deduct":
		if allow(ctx, "POST") {
			q.Deduct(ctx)
		}
	case "rollback":
		if allow(ctx, "POST") {
			q.Rollback(ctx)
		}
	case "usage":
		if allow(ctx, "GET") {
			q.Usage(ctx)
		}
	default:
		notFound(ctx)
	}
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
