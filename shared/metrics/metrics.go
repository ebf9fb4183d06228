// Package metrics is the one way vouchergate's processes export numbers: each counts in
// prometheus/client_golang collectors registered in its own registry, and serves that registry
// at /metrics through Handler.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// Handler serves g's metrics on fasthttp, in the exposition format the scraper asks for.
func Handler(g prometheus.Gatherer) fasthttp.RequestHandler {
	return fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
}
