package api

import (
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/httplog"
	"vouchergate/shared/wire"
)

// The ops listener (VG_BACKEND_OPS_ADDR) serves what only operators and Prometheus need: /metrics,
// which names every flash voucher with its limit and uses left, is served there and nowhere
// else. /healthz and /readyz are served on both, as on the edge: load balancers and health
// checks ask the public port.

// OpsRoutes are the routes of the ops listener.
func OpsRoutes() []Endpoint {
	return []Endpoint{{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/metrics"}}
}

// OpsHandle answers a request of the ops listener. Its requests are not counted in the API's
// request metrics: a scrape every few seconds would only add noise to them.
func (s *Server) OpsHandle(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.Response.Header.Set("Allow", "GET")
		respondError(ctx, fasthttp.StatusMethodNotAllowed, wire.CodeMethodNotAllowed, "use GET")
		return
	}
	switch string(ctx.Path()) {
	case "/healthz":
		respondJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ok"})
	case "/readyz":
		s.ready(ctx)
	case "/metrics":
		if s.metrics == nil {
			notFound(ctx)
			return
		}
		s.metrics(ctx)
	default:
		notFound(ctx)
	}
}

// OpsHTTPServer returns a fasthttp server for the ops listener: small GET requests only, what
// fasthttp reports logged as the public server's is (httplog).
func (s *Server) OpsHTTPServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler: s.OpsHandle, Name: "vouchergate-backend-ops", NoDefaultServerHeader: true,
		Logger: httplog.New(s.log, httplog.Every, nil), SecureErrorLogMessage: true,
		ReadTimeout: 5 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute,
		MaxRequestBodySize: 1024, Concurrency: 64, CloseOnShutdown: true,
	}
}
