package app

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// registerMetrics adds to a.Metrics, beside the proxy's counters, what the edge knows of its
// upstreams and of NATS, read when scraped, and the Go runtime's and the process's numbers.
func (a *App) registerMetrics() {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
	}
	a.Metrics.MustRegister(
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		gauge("vg_edge_backends_healthy", "Backends in service.", func() float64 { return float64(a.Pool.Healthy()) }),
		gauge("vg_edge_soldout_vouchers", "Vouchers answered as sold out by the edge.", func() float64 { return float64(len(a.Cache.Codes())) }),
		gauge("vg_edge_nats_connected", "1 when the NATS connection is up.", func() float64 { return b2f(a.Listener.Connected()) }),
		counter("vg_edge_nats_syncs_total", "Complete reads of the sold-out set from NATS.", a.Listener.Syncs),
		counter("vg_edge_nats_states_total", "Voucher states applied from NATS.", a.Listener.Applied),
		counter("vg_edge_nats_stale_states_total", "Voucher states from NATS ignored as older than the edge's.", a.Listener.Stale),
		counter("vg_edge_idle_conns_closed_total", "Idle keep-alive client connections closed to make room near VG_EDGE_MAX_CLIENT_CONNS.", a.idleClosed.Load),
		gauge("vg_edge_nats_unconfirmed_seconds", "Seconds since NATS last confirmed the edge's sold-out states (since start, before it ever did).",
			func() float64 { return a.unconfirmedFor().Seconds() }),
		gauge("vg_edge_soldout_unconfirmed_vouchers", "Vouchers answered as sold out from memory while NATS does not confirm them: each for at most VG_EDGE_SOLDOUT_KEEP more.",
			func() float64 { return float64(a.soldOutUnconfirmed()) }),
	)
}

// unconfirmedFor is how long ago NATS last confirmed the sold-out states (shared by the
// metrics and /readyz).
func (a *App) unconfirmedFor() time.Duration {
	at := a.Listener.ConfirmedAt()
	if at.IsZero() {
		at = a.started
	}
	return max(0, time.Since(at))
}

// soldOutUnconfirmed counts the sold-out vouchers answered from memory while NATS has missed
// its checks (three check periods without a confirmation): 0 while NATS confirms them.
func (a *App) soldOutUnconfirmed() int {
	if a.unconfirmedFor() <= 3*a.Config.StateCheckEvery() {
		return 0
	}
	return len(a.Cache.Codes())
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
