package proxy

import (
	"fmt"
	"io"
	"sync/atomic"
)

// counters are the proxy's Prometheus counters.
type counters struct {
	requests        [routeBadOrder + 1]atomic.Uint64 // by route
	soldOut         atomic.Uint64                    // reservations answered 409 here
	holderForwards  atomic.Uint64                    // reservations of a sold-out voucher forwarded: a holder's retry (or a false positive)
	unreadable      atomic.Uint64                    // reservations of a sold-out voucher forwarded: orderId not read with certainty
	upstreamErrors  [3]atomic.Uint64                 // 502, 503, 504 given for a failed call
	learnedFrom409  atomic.Uint64                    // 409 OUT_OF_STOCK passing through, each asking for the holders
	refreshesAsked  atomic.Uint64                    // busy entries asking to be read again before they expire
	rejectedRequest atomic.Uint64                    // 4xx given by the edge for a bad request
}

var routeNames = [...]string{
	routeCheckout: "checkout", routeLocal: "local", routeReserve: "reserve", routeConfirm: "confirm",
	routeRelease: "release", routeQuota: "quota", routeNotFound: "not_found", routeBadCode: "bad_code",
	routeBadOrder: "bad_order",
}

func (c *counters) upstreamError(status int) {
	switch status {
	case 502:
		c.upstreamErrors[0].Add(1)
	case 503:
		c.upstreamErrors[1].Add(1)
	case 504:
		c.upstreamErrors[2].Add(1)
	}
}

// WriteMetrics writes the proxy's counters in Prometheus text format.
func (p *Proxy) WriteMetrics(w io.Writer) {
	c := &p.counts
	fmt.Fprintln(w, "# HELP vg_edge_requests_total Requests by route.")
	fmt.Fprintln(w, "# TYPE vg_edge_requests_total counter")
	for r := range c.requests {
		fmt.Fprintf(w, "vg_edge_requests_total{route=%q} %d\n", routeNames[r], c.requests[r].Load())
	}
	counter := func(name, help string, v uint64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	counter("vg_edge_soldout_answers_total", "Reservations answered 409 OUT_OF_STOCK by the edge.", c.soldOut.Load())
	counter("vg_edge_holder_forwards_total", "Reservations of a sold-out voucher forwarded because the order may hold a use.", c.holderForwards.Load())
	counter("vg_edge_unreadable_forwards_total", "Reservations of a sold-out voucher forwarded because the orderId could not be read with certainty.", c.unreadable.Load())
	counter("vg_edge_learned_from_409_total", "Backend 409 OUT_OF_STOCK answers passing through.", c.learnedFrom409.Load())
	counter("vg_edge_refreshes_asked_total", "Sold-out entries read again before they expire.", c.refreshesAsked.Load())
	counter("vg_edge_rejected_requests_total", "Requests the edge refused as malformed, too large or not allowed.", c.rejectedRequest.Load())
	fmt.Fprintln(w, "# HELP vg_edge_upstream_errors_total Failed upstream calls by the status the edge answered.")
	fmt.Fprintln(w, "# TYPE vg_edge_upstream_errors_total counter")
	for i, status := range []int{502, 503, 504} {
		fmt.Fprintf(w, "vg_edge_upstream_errors_total{status=\"%d\"} %d\n", status, c.upstreamErrors[i].Load())
	}
}
