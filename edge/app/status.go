package app

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/httplog"
	"vouchergate/shared/wire"
)

// readiness is the body of /readyz.
type readiness struct {
	Ready    bool      `json:"ready"`
	Draining bool      `json:"draining,omitempty"` // shutting down: not ready, whatever else holds
	Backends []backend `json:"backends"`
	NATS     natsState `json:"nats"`
	Checkout *checkout `json:"checkout,omitempty"` // reported, not required: sold-out answers need no checkout API
	SoldOut  []string  `json:"soldOut"`
}

// checkout is whether the checkout API answers the probe (VG_EDGE_UPSTREAM_PROBE_PATH): any
// HTTP answer counts, its status is shown.
type checkout struct {
	Addr    string `json:"addr"`
	Answers bool   `json:"answers"`
	Status  int    `json:"status,omitempty"`
}

type backend struct {
	Addr    string `json:"addr"`
	Healthy bool   `json:"healthy"`
}

type natsState struct {
	Connected bool   `json:"connected"`
	Synced    bool   `json:"synced"`
	Syncs     uint64 `json:"syncs"`
}

// local answers the edge's own paths on the public port: /healthz, and /readyz with nothing
// but its verdict. Backend addresses, NATS state, the sold-out set and /metrics are for the
// ops listener (opsLocal) only.
func (a *App) local(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case "/healthz":
		respond(ctx, fasthttp.StatusOK, map[string]string{"status": "ok"})
	case "/readyz":
		r := a.readiness()
		respond(ctx, readyStatus(r.Ready), map[string]bool{"ready": r.Ready})
	}
}

// opsLocal answers the ops listener. /readyz is 503 while no backend is healthy: the edge
// can still answer sold-out vouchers then, but nothing else. NATS being away does not make the
// edge unready; it learns from the backends meanwhile. Whether the checkout API answers is
// reported, and asked only here, not on the public port.
func (a *App) opsLocal(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.Response.Header.Set("Allow", "GET")
		respond(ctx, fasthttp.StatusMethodNotAllowed, wire.Error{Error: wire.CodeMethodNotAllowed, Message: "use GET"})
		return
	}
	switch string(ctx.Path()) {
	case "/healthz":
		respond(ctx, fasthttp.StatusOK, map[string]string{"status": "ok"})
	case "/readyz":
		r := a.readiness()
		r.Checkout = a.checkoutState()
		respond(ctx, readyStatus(r.Ready), r)
	case "/metrics":
		a.metrics(ctx)
	default:
		respond(ctx, fasthttp.StatusNotFound, wire.Error{Error: wire.CodeNotFound, Message: "no such path"})
	}
}

// newOpsServer returns the server of the ops listener: it reads small GET requests only. What
// fasthttp reports goes to log as the public server's does (httplog): never a request's bytes,
// at most a line a second of each kind.
func newOpsServer(h fasthttp.RequestHandler, log *slog.Logger) *fasthttp.Server {
	return &fasthttp.Server{
		Handler: h, Name: "vouchergate-edge-ops", NoDefaultServerHeader: true,
		Logger: httplog.New(log, httplog.Every, nil), SecureErrorLogMessage: true,
		ReadTimeout: 5 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute,
		MaxRequestBodySize: 1024, Concurrency: 64, CloseOnShutdown: true,
	}
}

func (a *App) readiness() readiness {
	r := readiness{SoldOut: a.Cache.Codes(), NATS: a.natsState()}
	for _, b := range a.Pool.Backends() {
		r.Backends = append(r.Backends, backend{Addr: b.Addr, Healthy: b.Healthy})
		r.Ready = r.Ready || b.Healthy
	}
	if r.SoldOut == nil {
		r.SoldOut = []string{}
	}
	if a.serving.Draining() {
		r.Ready, r.Draining = false, true
	}
	return r
}

// checkoutState asks the checkout API, if one is configured, whether it answers.
func (a *App) checkoutState() *checkout {
	if a.upCheck == nil {
		return nil
	}
	status, err := a.upCheck.Probe()
	return &checkout{Addr: a.upCheck.Addr(), Answers: err == nil, Status: status}
}

func readyStatus(ready bool) int {
	if ready {
		return fasthttp.StatusOK
	}
	return fasthttp.StatusServiceUnavailable
}

func (a *App) natsState() natsState {
	n := natsState{Connected: a.Listener.Connected(), Syncs: a.Listener.Syncs()}
	select {
	case <-a.Listener.Synced():
		n.Synced = true
	default:
	}
	return n
}

func respond(ctx *fasthttp.RequestCtx, status int, v any) {
	b, _ := json.Marshal(v)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
