package api_test

import (
	"context"
	"errors"
	"testing"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/api"
)

// /readyz is 503 when a required probe fails and names what failed; a probe that is not
// required (NATS) is reported without making the backend unready.
func TestReadyzAnswersByItsRequiredProbes(t *testing.T) {
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("connection refused") }
	for _, tt := range []struct {
		name   string
		probes []api.Probe
		status int
		body   string
	}{
		{"all answer", []api.Probe{{Name: "postgres", Required: true, Check: ok}, {Name: "nats", Check: ok}}, 200,
			`{"status":"ready","checks":{"nats":"ok","postgres":"ok"}}`},
		{"nats down", []api.Probe{{Name: "postgres", Required: true, Check: ok}, {Name: "nats", Check: down}}, 200,
			`{"status":"ready","checks":{"nats":"not required: connection refused","postgres":"ok"}}`},
		{"redis down", []api.Probe{{Name: "redis", Required: true, Check: down}, {Name: "nats", Check: ok}}, 503,
			`{"status":"not_ready","checks":{"nats":"ok","redis":"connection refused"}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := api.New(api.Options{Probes: tt.probes})
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("GET")
			ctx.Request.SetRequestURI("/readyz")
			s.Handle(&ctx)
			if st, body := ctx.Response.StatusCode(), string(ctx.Response.Body()); st != tt.status || body != tt.body {
				t.Fatalf("/readyz: %d %s; want %d %s", st, body, tt.status, tt.body)
			}
		})
	}
}
