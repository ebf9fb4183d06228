package app

import (
	"encoding/json"

	"github.com/valyala/fasthttp"
)

// readiness is the body of /readyz.
type readiness struct {
	Ready    bool      `json:"ready"`
	Backends []backend `json:"backends"`
	NATS     natsState `json:"nats"`
	SoldOut  []string  `json:"soldOut"`
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

// local answers the edge's own paths. /readyz is 503 while no backend is healthy: the edge
// can still answer sold-out vouchers then, but nothing else. NATS being away does not make the
// edge unready; it learns from the backends meanwhile.
func (a *App) local(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case "/healthz":
		respond(ctx, fasthttp.StatusOK, map[string]string{"status": "ok"})
	case "/readyz":
		r := readiness{SoldOut: a.Cache.Codes(), NATS: a.natsState()}
		for _, b := range a.Pool.Backends() {
			r.Backends = append(r.Backends, backend{Addr: b.Addr, Healthy: b.Healthy})
			r.Ready = r.Ready || b.Healthy
		}
		if r.SoldOut == nil {
			r.SoldOut = []string{}
		}
		status := fasthttp.StatusOK
		if !r.Ready {
			status = fasthttp.StatusServiceUnavailable
		}
		respond(ctx, status, r)
	case "/metrics":
		a.metrics(ctx)
	}
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
