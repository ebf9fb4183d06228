package api_test

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/api"
)

// An admin call without a token, with another scheme and with a wrong token is told which it
// was, each with how to send the token, in plain JSON text (no \u003c escapes), and never with
// the token itself.
func TestAdminTokenRefusalsSayWhatWasSent(t *testing.T) {
	const token = "the-real-admin-token"
	s := api.New(api.Options{AdminToken: token})
	seen := map[string]string{}
	for name, authorization := range map[string]string{
		"missing":      "",
		"other scheme": "Basic dXNlcjpwYXNz",
		"wrong":        "Bearer not-the-token",
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("GET")
		ctx.Request.SetRequestURI("/admin/vouchers/X")
		if authorization != "" {
			ctx.Request.Header.Set("Authorization", authorization)
		}
		s.Handle(&ctx)
		body := string(ctx.Response.Body())
		if ctx.Response.StatusCode() != 401 || !strings.Contains(body, `"error":"UNAUTHORIZED"`) ||
			!strings.Contains(body, "Authorization: Bearer <VG_ADMIN_TOKEN>") {
			t.Errorf("%s token: %d %s; want 401 UNAUTHORIZED saying to send Authorization: Bearer <VG_ADMIN_TOKEN>", name, ctx.Response.StatusCode(), body)
		}
		if strings.Contains(body, `\u00`) || strings.Contains(body, token) {
			t.Errorf("%s token: %s; want no \\u escapes and never the token", name, body)
		}
		for other, b := range seen {
			if b == body {
				t.Errorf("a %s token and a %s one get the same answer: %s", name, other, body)
			}
		}
		seen[name] = body
	}
}
