// Package proxy is the edge's HTTP handler: it answers reservations (and their dry runs) for
// sold-out vouchers from the sold-out cache, sends voucher and quota requests to the backend
// pool and everything else to the checkout API, with bounded calls and clean headers, and
// answers its own /healthz and /readyz.
//
// A request's way: route by path (routes.go) → with shoppers' tokens on, the token and its
// subject (auth.go) → sold-out check for reservations (soldout.go) → forward (forward.go), with
// clean headers (headers.go) and the edge's credentials toward the backends (auth.go) → relay
// the answer, or a JSON error (answers.go).
package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"vouchergate/edge/soldout"
	"vouchergate/edge/token"
	"vouchergate/edge/upstream"
	"vouchergate/shared/wire"
)

// Doer sends a request upstream and reads the answer by a deadline. Implementations MUST be
// safe for concurrent use and MUST NOT keep working on the call after returning.
type Doer interface {
	Do(req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error
}

// Asker is told which voucher's state to read again (soldout.Refresher). Ask MUST NOT block.
type Asker interface {
	Ask(code string)
}

// Options configure a Proxy. Backends, SoldOut and Refresher are required.
type Options struct {
	Backends          Doer                    // the backend pool: voucher and quota paths
	Checkout          *upstream.Checkout      // the checkout API: every other path, streamed; nil: 404
	SoldOut           *soldout.Cache          // vouchers known to be sold out, with their holders
	Refresher         Asker                   // reads a voucher's holders after a passing 409
	Local             fasthttp.RequestHandler // /healthz, /readyz; nil: 404
	BackendTimeout    time.Duration           // one backend call, in all
	MaxCheckoutAnswer int                     // the largest checkout answer relayed (502 or cut past it); 0: no cap
	WriteIdle         time.Duration           // the longest write of a piece of a streamed answer to the client
	MaxAPIBodyBytes   int                     // body limit of voucher and quota requests
	ReserveSlots      int                     // reservations at the backends at once; 0: unbounded
	ReserveWait       time.Duration           // how long a reservation waits for one of those slots
	MaxBodyBytes      int                     // body limit of checkout requests; MaxAPIBodyBytes when lower
	BodyBudget        int                     // bodies larger than MaxAPIBodyBytes being read or forwarded, in bytes in all; 0: no bound
	MaxUpstreamHead   int                     // the largest request header sent upstream (config.HeaderLimit.Forwarded); 0: no check
	Tokens            *token.Verifier         // shoppers' tokens (auth.go); nil: not checked
	APIKey            string                  // the edge's service key, sent to the backends; "": none
	TrustedProxies    []netip.Prefix          // proxies whose X-Forwarded-Proto, -Host, -For and Forwarded are kept
	Metrics           prometheus.Registerer   // takes the proxy's counters; nil: counted, not exported
	Log               *slog.Logger
}

// Proxy is the edge's handler. It is safe for concurrent use.
type Proxy struct {
	opts     Options
	log      *slog.Logger
	counts   metrics
	idPrefix []byte // this edge's request-id prefix
	idSeq    atomic.Uint64
	errLog   logLimit
	room     waitRoom

	bodies       budget // large bodies held (body.go)
	apiKeyHeader []byte // "Bearer <APIKey>", or nil
}

// New returns a Proxy.
func New(o Options) *Proxy {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	o.MaxBodyBytes = max(o.MaxBodyBytes, o.MaxAPIBodyBytes)
	var r [4]byte
	_, _ = rand.Read(r[:])
	p := &Proxy{opts: o, log: o.Log, counts: newMetrics(o.Metrics),
		idPrefix: []byte("edge-" + hex.EncodeToString(r[:]) + "-"), errLog: logLimit{every: time.Second},
		room: newWaitRoom(o.ReserveSlots, o.ReserveWait)}
	p.bodies.max = int64(o.BodyBudget)
	if o.APIKey != "" {
		p.apiKeyHeader = []byte("Bearer " + o.APIKey)
	}
	return p
}

// Handle routes one request, and counts and times its answer by route.
func (p *Proxy) Handle(ctx *fasthttp.RequestCtx) {
	r := p.serve(ctx)
	p.counts.answered(r, ctx)
}

// serve answers the request and returns its route.
func (p *Proxy) serve(ctx *fasthttp.RequestCtx) (r route) {
	defer p.recoverPanic(ctx)
	m := matchPath(ctx.Path())
	r = m.route
	if ctx.IsConnect() || ctx.IsTrace() {
		p.reject(ctx, fasthttp.StatusMethodNotAllowed, wire.CodeMethodNotAllowed, "CONNECT and TRACE are not served")
		return
	}
	p.counts.requests[m.route].Inc()
	if m.allow != "" && string(ctx.Method()) != m.allow && !(m.route == routeLocal && ctx.IsHead()) {
		ctx.Response.Header.Set("Allow", m.allow)
		p.reject(ctx, fasthttp.StatusMethodNotAllowed, wire.CodeMethodNotAllowed, "use "+m.allow)
		return
	}
	switch m.route {
	case routeLocal:
		if p.opts.Local == nil {
			p.reject(ctx, fasthttp.StatusNotFound, wire.CodeNotFound, "no such path")
			return
		}
		p.opts.Local(ctx)
	case routeCheckout:
		if p.opts.Checkout == nil {
			p.reject(ctx, fasthttp.StatusNotFound, wire.CodeNotFound, "no such path")
			return
		}
		if p.bodyFits(ctx, m.route) {
			p.forward(ctx, call{})
		}
	case routeNotFound:
		p.reject(ctx, fasthttp.StatusNotFound, wire.CodeNotFound, "no such path")
	case routeBadCode:
		p.reject(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, "voucher code must match ^[A-Z0-9_-]{1,32}$")
	case routeBadOrder:
		p.reject(ctx, fasthttp.StatusBadRequest, wire.CodeBadRequest, wire.CheckID("orderId", string(m.order), wire.MaxOrderIDLen).Error())
	default: // reserve, validate, confirm, release, quota
		if !p.bodyFits(ctx, m.route) {
			return
		}
		var shopper *wire.Shopper
		if p.opts.Tokens != nil {
			var ok bool
			if m.route == routeReserve || m.route == routeValidate {
				shopper, ok = p.reservingShopper(ctx, m.code, m.route == routeValidate)
			} else {
				shopper, ok = p.authenticate(ctx)
			}
			if !ok {
				return
			}
		}
		switch {
		case m.route == routeReserve:
			p.reserve(ctx, m.code, shopper)
			return
		case m.route == routeValidate:
			p.validate(ctx, m.code, shopper)
			return
		case m.route == routeQuota && shopper != nil && !p.quotaFor(ctx, shopper):
			return
		}
		p.forward(ctx, p.toBackend(nil, shopper))
	}
	return
}

func (p *Proxy) reject(ctx *fasthttp.RequestCtx, status int, code, message string) {
	p.counts.rejectedRequest.Inc()
	answer(ctx, status, code, message)
}

// ReadFailure answers a request that could not be read; use it as the server's ErrorHandler.
func (p *Proxy) ReadFailure(ctx *fasthttp.RequestCtx, err error) {
	p.counts.rejectedRequest.Inc()
	readFailure(ctx, err)
}

// recoverPanic turns a panic into a 500, so that one bad request cannot stop the edge.
func (p *Proxy) recoverPanic(ctx *fasthttp.RequestCtx) {
	if r := recover(); r != nil {
		p.log.Error("panic serving request", "path", string(ctx.Path()), "panic", r)
		ctx.Response.Reset()
		answer(ctx, fasthttp.StatusInternalServerError, wire.CodeInternal, "the edge failed on this request")
	}
}

// logLimit lets one log line through per interval, so a dead upstream does not flood the log.
type logLimit struct {
	every time.Duration
	last  atomic.Int64
}

func (l *logLimit) allow() bool {
	now := time.Now().UnixNano()
	last := l.last.Load()
	return now-last >= int64(l.every) && l.last.CompareAndSwap(last, now)
}
