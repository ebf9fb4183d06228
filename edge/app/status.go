package app

import (
	"encoding/json"
	"fmt"

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
		ctx.SetContentType("text/plain; version=0.0.4")
		w := ctx.Response.BodyWriter()
		a.Proxy.WriteMetrics(w)
		gauge := func(name, help string, v any) {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %v\n", name, help, name, name, v)
		}
		n := a.natsState()
		gauge("vg_edge_backends_healthy", "Backends in service.", a.Pool.Healthy())
		gauge("vg_edge_soldout_vouchers", "Vouchers answered as sold out by the edge.", len(a.Cache.Codes()))
		gauge("vg_edge_nats_connected", "1 when the NATS connection is up.", oneIfTrue(n.Connected))
		fmt.Fprintf(w, "# HELP vg_edge_nats_syncs_total Complete reads of the sold-out set from NATS.\n# TYPE vg_edge_nats_syncs_total counter\nvg_edge_nats_syncs_total %d\n", n.Syncs)
		fmt.Fprintf(w, "# HELP vg_edge_nats_states_total Voucher states applied from NATS.\n# TYPE vg_edge_nats_states_total counter\nvg_edge_nats_states_total %d\n", a.Listener.Applied())
		fmt.Fprintf(w, "# HELP vg_edge_nats_stale_states_total Voucher states from NATS ignored as older than the edge's.\n# TYPE vg_edge_nats_stale_states_total counter\nvg_edge_nats_stale_states_total %d\n", a.Listener.Stale())
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

func oneIfTrue(b bool) int {
	if b {
		return 1
	}
	return 0
}

func respond(ctx *fasthttp.RequestCtx, status int, v any) {
	b, _ := json.Marshal(v)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
