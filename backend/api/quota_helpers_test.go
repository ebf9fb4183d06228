package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/app"
	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
	"vouchergate/testkit"
)

var t0 = time.Date(2025, 3, 3, 2, 0, 0, 0, time.UTC) // Monday 10:00 in Shanghai

const dayRule = `{"bizId":1,"identityType":"USER","dimension":"ITEM:1001","limit":3,"window":{"type":"DAY","timezone":"Asia/Shanghai"}}`

// startQuotas boots a backend on cfg (backendtest.Config if nil) whose services tell time from
// a clock stopped at start, remembering idemKeys for ten minutes of it.
func startQuotas(t testing.TB, start time.Time, cfg *config.Backend) (*backendtest.Backend, *testkit.ManualClock) {
	t.Helper()
	if cfg == nil {
		c := backendtest.Config(t)
		cfg = &c
	}
	cfg.QuotaIdemTTL = 10 * time.Minute
	clock := testkit.NewManualClock(start)
	return backendtest.Start(t, *cfg, app.WithClock(clock)), clock
}

// reply is one HTTP answer.
type reply struct {
	status     int
	body       []byte
	retryAfter string
}

func (a reply) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("answer %d %s: %v", a.status, a.body, err)
	}
}

// do sends a request to b over HTTP; body "" sends none.
func do(t testing.TB, b *backendtest.Backend, method, uri, body string) reply {
	t.Helper()
	var sent any
	if body != "" {
		sent = body
	}
	status, got := b.Do(t, method, uri, sent)
	return reply{status: status, body: got}
}

// call runs handler on a request built in memory, without a server, with the admin token on
// admin paths.
func call(handler fasthttp.RequestHandler, method, uri, body string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetMethod(method)
	if strings.HasPrefix(uri, "/admin/") {
		ctx.Request.Header.Set("Authorization", "Bearer "+backendtest.Token)
	}
	ctx.Request.SetBodyString(body)
	handler(&ctx)
	return &ctx
}

// replyOf reads the answer of a call.
func replyOf(ctx *fasthttp.RequestCtx) reply {
	return reply{status: ctx.Response.StatusCode(), body: append([]byte(nil), ctx.Response.Body()...),
		retryAfter: string(ctx.Response.Header.Peek("Retry-After"))}
}
