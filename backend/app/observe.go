package app

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"vouchergate/backend/api"
)

// observe registers in a.Metrics what the backend shows beyond its services' own numbers (the
// Go runtime and the process, the pools, the calls to Redis and PostgreSQL, whether each store
// answers) and returns the probes of /readyz: PostgreSQL must answer, Redis answer and take a
// write (probe.go); NATS is reported only, as edges resync when it comes back.
func (a *App) observe() []api.Probe {
	reg := a.Metrics
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.Redis.AddHook(newRedisCalls(reg))

	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	pg := a.Pool.Stat
	rd := a.Redis.PoolStats
	reg.MustRegister(
		gauge("vouchergate_pg_pool_acquired_conns", "PostgreSQL connections in use.", func() float64 { return float64(pg().AcquiredConns()) }),
		gauge("vouchergate_pg_pool_idle_conns", "PostgreSQL connections idle.", func() float64 { return float64(pg().IdleConns()) }),
		gauge("vouchergate_pg_pool_max_conns", "PostgreSQL connections allowed (VG_DB_MAX_CONNS).", func() float64 { return float64(pg().MaxConns()) }),
		counter("vouchergate_pg_pool_empty_acquires_total", "Acquires that found no idle PostgreSQL connection and waited or dialed.",
			func() float64 { return float64(pg().EmptyAcquireCount()) }),
		counter("vouchergate_pg_pool_acquire_wait_seconds_total", "Time spent acquiring PostgreSQL connections.",
			func() float64 { return pg().AcquireDuration().Seconds() }),
		gauge("vouchergate_redis_pool_total_conns", "Redis connections open.", func() float64 { return float64(rd().TotalConns) }),
		gauge("vouchergate_redis_pool_idle_conns", "Redis connections idle.", func() float64 { return float64(rd().IdleConns) }),
		counter("vouchergate_redis_pool_timeouts_total", "Redis pool waits that timed out.", func() float64 { return float64(rd().Timeouts) }),
		counter("vouchergate_redis_pool_misses_total", "Redis calls that found no idle connection.", func() float64 { return float64(rd().Misses) }),
	)

	probes := []api.Probe{
		{Name: "postgres", Required: true, Check: a.Pool.Ping},
		{Name: "redis", Required: true, Check: newRedisProbe(a.Redis, a.Config.RedisPrefix).check},
		{Name: "nats", Check: func(context.Context) error {
			if s := a.NATS.Status(); s != nats.CONNECTED {
				return fmt.Errorf("nats is %s", s)
			}
			return nil
		}},
	}
	up := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vouchergate_dependency_up",
		Help: "1 when the dependency answered its probe at the last scrape (the same probes as /readyz)."}, []string{"dependency"})
	reg.MustRegister(probeCollector{probes: probes, up: up})
	return probes
}

// probeCollector runs the probes when scraped, so vouchergate_dependency_up is as fresh as the
// scrape.
type probeCollector struct {
	probes []api.Probe
	up     *prometheus.GaugeVec
}

func (c probeCollector) Describe(ch chan<- *prometheus.Desc) { c.up.Describe(ch) }

func (c probeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.probes {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		err := p.Check(ctx)
		cancel()
		v := 1.0
		if err != nil {
			v = 0
		}
		c.up.WithLabelValues(p.Name).Set(v)
	}
	c.up.Collect(ch)
}

// probeTimeout bounds one probe at a scrape.
const probeTimeout = 500 * time.Millisecond
