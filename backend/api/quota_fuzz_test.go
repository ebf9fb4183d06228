package api_test

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/valyala/fasthttp"
)

// checkAnswer fails unless the answer is a 2xx or 4xx with a JSON body, and a 4xx names a code.
func checkAnswer(t *testing.T, what string, ctx *fasthttp.RequestCtx) {
	t.Helper()
	status := ctx.Response.StatusCode()
	if status >= 500 || status < 200 {
		t.Fatalf("%s: answered %d %s", what, status, ctx.Response.Body())
	}
	var body map[string]any
	if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil {
		t.Fatalf("%s: answered %d with a body that is not JSON: %q", what, status, ctx.Response.Body())
	}
	if status >= 400 {
		if code, _ := body["error"].(string); code == "" {
			t.Fatalf("%s: answered %d without an error code: %s", what, status, ctx.Response.Body())
		}
	}
}

// The deduct and rollback decoders never panic and never answer 5xx, whatever the body.
func FuzzDeductBody(f *testing.F) {
	for _, s := range []string{
		`{"bizId":1,"idemKey":"order-77","items":[{"identityType":"USER","identity":"12345","dimensions":["ITEM:1001","TYPE:GAME"],"amount":1}]}`,
		`{"bizId":1,"idemKey":"k","items":[{"identityType":"DEVICE","identity":"d","dimensions":["ITEM:1"]},{"identityType":"PHONE","identity":"1380013","dimensions":["ITEM:1"],"amount":2}]}`,
		`{"bizId":1,"idemKey":"k"}`, `{}`, `[]`, `null`, `{"bizId":1e400}`, `{"items":[null]}`, `{"items":[{"dimensions":[null]}]}`,
		"{\"bizId\":1,\"idemKey\":\"\\u0000\"}", `{"bizId":1,"idemKey":"a}b"}`,
	} {
		f.Add(s)
	}
	b, _ := startQuotas(f, t0, nil)
	handler := b.App.API.Handle
	c := call(handler, "POST", "/admin/quota-rules", dayRule)
	if c.Response.StatusCode() != 201 {
		f.Fatalf("rule: %s", c.Response.Body())
	}
	f.Fuzz(func(t *testing.T, body string) {
		checkAnswer(t, "deduct", call(handler, "POST", "/quotas/deduct", body))
		checkAnswer(t, "rollback", call(handler, "POST", "/quotas/rollback", body))
	})
}

// The rule decoder never panics and never answers 5xx.
func FuzzRuleBody(f *testing.F) {
	for _, s := range []string{
		dayRule,
		`{"bizId":1,"identityType":"USER","dimension":"*","limit":10,"window":{"type":"ROLLING","size":"7d"}}`,
		`{"bizId":1,"identityType":"USER","dimension":"ITEM:*","limit":1,"window":{"type":"FIXED","start":"2025-11-11T00:00:00+08:00","end":"2025-11-12T00:00:00+08:00"}}`,
		`{"window":{"type":"ROLLING","size":"-9223372036854775808ns"}}`, `{"window":{"type":"MONTH","timezone":"../../etc/passwd"}}`,
	} {
		f.Add(s)
	}
	b, _ := startQuotas(f, t0, nil)
	handler := b.App.API.Handle
	f.Fuzz(func(t *testing.T, body string) {
		checkAnswer(t, "put rule", call(handler, "POST", "/admin/quota-rules", body))
	})
}

// The usage query decoder never panics and never answers 5xx.
func FuzzUsageQuery(f *testing.F) {
	for _, s := range []string{"bizId=1&identityType=USER&identity=12345&dimension=ITEM:1001", "bizId=1&identity=%00", "bizId=-0&dimension="} {
		f.Add(s)
	}
	b, _ := startQuotas(f, t0, nil)
	handler := b.App.API.Handle
	f.Fuzz(func(t *testing.T, query string) {
		checkAnswer(t, "usage", call(handler, "GET", "/quotas/usage?"+query, ""))
		checkAnswer(t, "get rule", call(handler, "GET", "/admin/quota-rules/"+url.PathEscape(query), ""))
	})
}
