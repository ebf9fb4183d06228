package proxy

import (
	"bytes"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"vouchergate/shared/wire"
)

// metrics are the proxy's Prometheus counters, each resolved once, labels included, so that
// counting on the sold-out path is one atomic add and allocates nothing.
type metrics struct {
	requests        [routeBadOrder + 1]prometheus.Counter  // by route
	duration        [routeBadOrder + 1]prometheus.Observer // by route: from the request read to its answer ready
	answers         *prometheus.CounterVec                 // by route, status and outcome code
	soldOutAnswers  prometheus.Counter                     // answers{route=reserve,status=409,code=OUT_OF_STOCK}, resolved once
	soldOutValids   prometheus.Counter                     // answers{route=validate,status=200,code=OUT_OF_STOCK}, resolved once
	pausedAnswers   prometheus.Counter                     // answers{route=reserve,status=422,code=NOT_ELIGIBLE}, resolved once
	pausedValids    prometheus.Counter                     // answers{route=validate,status=200,code=NOT_ELIGIBLE}, resolved once
	paused          prometheus.Counter                     // reservations of a paused voucher answered 422 here
	pausedValid     prometheus.Counter                     // dry runs of a paused voucher answered "not valid: NOT_ELIGIBLE PAUSED" here
	soldOut         prometheus.Counter                     // reservations answered 409 here
	soldOutValid    prometheus.Counter                     // dry runs answered "not valid: OUT_OF_STOCK" here
	holderForwards  prometheus.Counter                     // reservations of a sold-out voucher forwarded: a holder's retry (or a false positive)
	unreadable      prometheus.Counter                     // reservations of a sold-out voucher forwarded: the backend would not read the body
	slowReads       prometheus.Counter                     // reservations of a sold-out voucher whose body took the full decode
	upstreamErrors  [len(upstreamStatuses)]prometheus.Counter
	learnedFrom409  prometheus.Counter     // 409 OUT_OF_STOCK passing through, each asking for the holders
	refreshesAsked  prometheus.Counter     // busy entries asking to be read again before they expire
	rejectedRequest prometheus.Counter     // 4xx given by the edge for a bad request
	reserveWaits    prometheus.Counter     // reservations that found no free backend slot and waited
	bodyBudgetFull  prometheus.Counter     // 503 given because the bodies being read filled the budget
	tokensRefused   *prometheus.CounterVec // 401 for a shopper's token, by reason
	subjectRefused  prometheus.Counter     // 403: a good token for another customer or identity
}

var routeNames = [...]string{
	routeCheckout: "checkout", routeLocal: "local", routeReserve: "reserve", routeValidate: "validate", routeConfirm: "confirm",
	routeRelease: "release", routeRefund: "refund", routeQuota: "quota", routeNotFound: "not_found", routeBadCode: "bad_code",
	routeBadOrder: "bad_order",
}

// upstreamStatuses are the answers the edge gives for a failed upstream call.
var upstreamStatuses = [...]int{502, 503, 504}

// newMetrics makes the proxy's counters and registers them in reg, unless reg is nil.
func newMetrics(reg prometheus.Registerer) metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := metrics{
		soldOut:         counter("vg_edge_soldout_answers_total", "Reservations answered 409 OUT_OF_STOCK by the edge."),
		soldOutValid:    counter("vg_edge_soldout_validate_answers_total", "Dry runs of reservations (validate) answered OUT_OF_STOCK by the edge."),
		paused:          counter("vg_edge_paused_answers_total", "Reservations of a paused voucher answered 422 NOT_ELIGIBLE (PAUSED) by the edge."),
		pausedValid:     counter("vg_edge_paused_validate_answers_total", "Dry runs of reservations of a paused voucher answered NOT_ELIGIBLE (PAUSED) by the edge."),
		holderForwards:  counter("vg_edge_holder_forwards_total", "Reservations of a sold-out voucher forwarded because the order may hold a use."),
		unreadable:      counter("vg_edge_unreadable_forwards_total", "Reservations of a sold-out voucher forwarded because the backend would refuse the body (it gets the backend's 400)."),
		slowReads:       counter("vg_edge_slow_reads_total", "Reservations of a sold-out voucher whose orderId the fast scanner could not be certain of, read with a full JSON decode."),
		learnedFrom409:  counter("vg_edge_learned_from_409_total", "Backend 409 OUT_OF_STOCK answers passing through."),
		refreshesAsked:  counter("vg_edge_refreshes_asked_total", "Sold-out entries read again before they expire."),
		rejectedRequest: counter("vg_edge_rejected_requests_total", "Requests the edge refused as malformed, too large or not allowed."),
		reserveWaits:    counter("vg_edge_reserve_waits_total", "Reservations that found every backend slot taken and waited for one."),
		bodyBudgetFull:  counter("vg_edge_body_budget_full_total", "Requests answered 503 because the bodies being read filled VG_EDGE_BODY_BUDGET_BYTES."),
		subjectRefused:  counter("vg_edge_subject_refused_total", "Requests answered 403 because the token's shopper is not the customer, or does not carry the quota identity, of the request."),
		tokensRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vg_edge_tokens_refused_total",
			Help: "Requests answered 401 for their shopper's token, by reason (missing, malformed, signature, expired, ...)."}, []string{"reason"}),
	}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vg_edge_requests_total",
		Help: "Requests by route."}, []string{"route"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vg_edge_request_duration_seconds",
		Help:    "Time from a request read to its answer ready, by route.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}},
		[]string{"route"})
	m.answers = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vg_edge_answers_total",
		Help: "Answers by route, status and outcome code (the error code of the body, or OK), the edge's own and relayed."},
		[]string{"route", "status", "code"})
	for r := range m.requests {
		m.requests[r] = requests.WithLabelValues(routeNames[r])
		m.duration[r] = duration.WithLabelValues(routeNames[r])
	}
	m.soldOutAnswers = m.answers.WithLabelValues(routeNames[routeReserve], "409", wire.CodeOutOfStock)
	m.soldOutValids = m.answers.WithLabelValues(routeNames[routeValidate], "200", wire.CodeOutOfStock)
	m.pausedAnswers = m.answers.WithLabelValues(routeNames[routeReserve], "422", wire.CodeNotEligible)
	m.pausedValids = m.answers.WithLabelValues(routeNames[routeValidate], "200", wire.CodeNotEligible)
	upstream := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vg_edge_upstream_errors_total",
		Help: "Failed upstream calls by the status the edge answered."}, []string{"status"})
	for i, status := range upstreamStatuses {
		m.upstreamErrors[i] = upstream.WithLabelValues(strconv.Itoa(status))
	}
	if reg != nil {
		reg.MustRegister(requests, duration, m.answers, upstream, m.soldOut, m.soldOutValid, m.paused, m.pausedValid,
			m.holderForwards, m.unreadable,
			m.learnedFrom409, m.refreshesAsked, m.rejectedRequest, m.slowReads, m.bodyBudgetFull, m.reserveWaits,
			m.tokensRefused, m.subjectRefused)
	}
	return m
}

func (m *metrics) upstreamError(status int) {
	for i, s := range upstreamStatuses {
		if s == status {
			m.upstreamErrors[i].Inc()
		}
	}
}

var notValidPrefix = []byte(`{"valid":false,"error":"`) // a dry run's refusal: its code is the outcome

// answered counts and times the answer in ctx to a request of route r. The answers from memory
// (a sold-out or paused voucher's reservation, or dry run) are counted on counters resolved once; others look theirs up
// by label. A dry run's refusal is counted under its code.
func (m *metrics) answered(r route, ctx *fasthttp.RequestCtx) {
	m.duration[r].Observe(time.Since(ctx.Time()).Seconds())
	status := ctx.Response.StatusCode()
	var body []byte
	if !ctx.Response.IsBodyStream() { // a streamed answer is the server's to read, once
		body = ctx.Response.Body()
	}
	switch {
	case r == routeReserve && status == fasthttp.StatusConflict && bytes.Equal(body, soldOutBody):
		m.soldOutAnswers.Inc()
		return
	case r == routeValidate && status == fasthttp.StatusOK && bytes.Equal(body, soldOutValidBody):
		m.soldOutValids.Inc()
		return
	case r == routeReserve && status == fasthttp.StatusUnprocessableEntity && bytes.Equal(body, pausedBody):
		m.pausedAnswers.Inc()
		return
	case r == routeValidate && status == fasthttp.StatusOK && bytes.Equal(body, pausedValidBody):
		m.pausedValids.Inc()
		return
	}
	prefix := wire.ErrorPrefix
	if r == routeValidate && status == fasthttp.StatusOK {
		prefix = notValidPrefix
	}
	m.answers.WithLabelValues(routeNames[r], strconv.Itoa(status), wire.OutcomeCode(body, prefix)).Inc()
}
