package api

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"vouchergate/shared/wire"
)

// httpMetrics counts the API's answers by route, status and outcome code, and times them by
// route. The code is the error code of the answer's body ({"error":"OUT_OF_STOCK",…}), or OK for
// an answer without one.
type httpMetrics struct {
	answers  *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) httpMetrics {
	m := httpMetrics{
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vouchergate_http_requests_total",
			Help: "Requests answered, by route, status and outcome code (OK, OUT_OF_STOCK, ALREADY_USED, …)."},
			[]string{"route", "status", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vouchergate_http_request_duration_seconds",
			Help:    "Time from a request read to its answer ready, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}},
			[]string{"route"}),
	}
	if reg != nil {
		reg.MustRegister(m.answers, m.duration)
	}
	return m
}

// observe counts the answer in ctx under route, started at start.
func (m httpMetrics) observe(ctx *fasthttp.RequestCtx, route string, start time.Time) {
	m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	code := wire.OutcomeCode(ctx.Response.Body(), wire.ErrorPrefix)
	m.answers.WithLabelValues(route, strconv.Itoa(ctx.Response.StatusCode()), code).Inc()
}
