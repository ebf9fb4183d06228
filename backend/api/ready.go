package api

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"
)

// Probe checks one thing the backend depends on, for /readyz. Required probes make the backend
// not ready when they fail; the others are reported only.
type Probe struct {
	Name     string
	Required bool
	// ReportOnly, if set, tells the errors of a required probe that are reported only, as a
	// probe not required is: an outcome the probe cannot decide on (a policy Redis will not
	// tell) rather than a failure.
	ReportOnly func(error) bool
	Check      func(ctx context.Context) error
}

// readiness is /readyz's answer.
type readiness struct {
	Status string            `json:"status"` // ready, not_ready, or draining (shutting down)
	Checks map[string]string `json:"checks"` // probe name → ok, or what failed
}

// probeTimeout bounds each probe of /readyz.
const probeTimeout = time.Second

// ready answers GET /readyz: 200 when every required probe passes, else 503; the body names
// each probe's result. A draining server (Drain) is not ready, whatever its probes say.
func (s *Server) ready(ctx *fasthttp.RequestCtx) {
	if s.draining.Load() {
		ctx.Response.Header.Set("Retry-After", "1")
		respondJSON(ctx, fasthttp.StatusServiceUnavailable, readiness{Status: "draining", Checks: map[string]string{}})
		return
	}
	r := readiness{Status: "ready", Checks: make(map[string]string, len(s.opts.Probes))}
	for _, p := range s.opts.Probes {
		c, cancel := context.WithTimeout(context.Background(), probeTimeout)
		err := p.Check(c)
		cancel()
		switch {
		case err == nil:
			r.Checks[p.Name] = "ok"
		case p.Required && (p.ReportOnly == nil || !p.ReportOnly(err)):
			r.Status = "not_ready"
			r.Checks[p.Name] = err.Error()
		default:
			r.Checks[p.Name] = "not required: " + err.Error()
		}
	}
	status := fasthttp.StatusOK
	if r.Status != "ready" {
		status = fasthttp.StatusServiceUnavailable
		ctx.Response.Header.Set("Retry-After", "1")
	}
	respondJSON(ctx, status, r)
}
