package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/valyala/fasthttp"

	"vouchergate/edge/token"
	"vouchergate/shared/events"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// Issue 14: shoppers' tokens at the edge.

const edgeKey = "vg_edge_test_key"

func newVerifier(t testing.TB, iss *testkit.TokenIssuer) *token.Verifier {
	t.Helper()
	v, err := token.New(token.Options{JWKS: iss.JWKS(false), Algs: []string{"RS256", "ES256", "EdDSA", "HS256"},
		Audience: iss.Audience, Issuer: iss.Issuer, Leeway: 30 * time.Second,
		IdentityClaims: map[string]string{"DEVICE": "device_id", "PHONE": "phone_number"}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// tokenEdge is an edge with tokens on and a service key, in front of a fake backend and a
// checkout API.
func tokenEdge(t *testing.T) (*edge, *fakeBackend, *checkout, *testkit.TokenIssuer) {
	t.Helper()
	iss := testkit.NewTokenIssuer(t)
	fb := newFakeBackend(map[string]int{"FLASH": 10})
	beAddr, _ := testkit.ServeHTTP(t, fb.handle)
	co := &checkout{}
	coAddr, _ := testkit.ServeHTTP(t, co.handle)
	e := startEdge(t, edgeConfig{backends: []string{beAddr}, checkout: coAddr, tokens: newVerifier(t, iss), apiKey: edgeKey,
		local: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString(`{"status":"ok"}`) }})
	return e, fb, co, iss
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func reservation(customer string) string {
	return `{"customerId":` + customer + `,"orderId":"o-1","orderAmount":1000}`
}

// Forged, expired, not-yet-valid, wrong-audience, wrong-issuer, unsigned and
// algorithm-confused tokens, and none, get 401 at the edge on every path that needs one; no
// request reaches the backend.
func TestBadTokensAreRefusedAtTheEdge(t *testing.T) {
	e, fb, _, iss := tokenEdge(t)
	other := testkit.NewTokenIssuer(t)
	claims := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := iss.Claims("42")
		change(c)
		return c
	}
	confused := jwt.NewWithClaims(jwt.SigningMethodHS256, iss.Claims("42"))
	confused.Header["kid"] = "rsa"
	confusedTok, _ := confused.SignedString(iss.RSAPublicDER(t))
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, iss.Claims("42")).SignedString(jwt.UnsafeAllowNoneSignatureType)

	for _, tt := range []struct {
		name    string
		headers []string
		invalid bool   // error="invalid_token" (a token was sent)
		reason  string // vg_edge_tokens_refused_total's label
	}{
		{"no Authorization", nil, false, "missing"},
		{"Basic credentials", []string{"Authorization", "Basic dXNlcjpwYXNz"}, false, "missing"},
		{"Bearer with nothing", []string{"Authorization", "Bearer "}, false, "missing"},
		{"forged: another issuer's key", bearer(other.Sign(t, "RS256", iss.Claims("42"))), true, "signature"},
		{"expired", bearer(iss.Sign(t, "ES256", claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() }))), true, "expired"},
		{"not yet valid", bearer(iss.Sign(t, "ES256", claims(func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Minute).Unix() }))), true, "not_yet_valid"},
		{"wrong audience", bearer(iss.Sign(t, "RS256", claims(func(c jwt.MapClaims) { c["aud"] = "another-app" }))), true, "audience"},
		{"wrong issuer", bearer(iss.Sign(t, "RS256", claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.test" }))), true, "issuer"},
		{"alg none", bearer(none), true, "signature"},
		{"HS256 with the RSA public key as secret", bearer(confusedTok), true, "signature"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			refused := e.proxy.counts.tokensRefused.WithLabelValues(tt.reason)
			before := testutil.ToFloat64(refused)
			paths := []struct{ method, uri, body string }{
				{"POST", "/vouchers/FLASH/reservations", reservation(`"42"`)},
				{"POST", "/vouchers/FLASH/reservations/o-1/confirm", ""},
				{"DELETE", "/vouchers/FLASH/reservations/o-1", ""},
				{"POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"42","dimensions":["ITEM:1"]}]}`},
				{"POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k"}`},
				{"GET", "/quotas/usage?bizId=1&identityType=USER&identity=42", ""},
			}
			for _, path := range paths {
				a := e.do(t, path.method, path.uri, path.body, tt.headers...)
				if a.status != 401 || errorCode(t, a) != "UNAUTHORIZED" {
					t.Errorf("%s %s: %d %s; want 401 UNAUTHORIZED", path.method, path.uri, a.status, a.body)
				}
				www := string(a.header.Peek("WWW-Authenticate"))
				if !strings.HasPrefix(www, "Bearer") || strings.Contains(www, `error="invalid_token"`) != tt.invalid {
					t.Errorf("%s %s: WWW-Authenticate %q; invalid_token wanted: %v", path.method, path.uri, www, tt.invalid)
				}
			}
			if got := testutil.ToFloat64(refused) - before; got != float64(len(paths)) {
				t.Errorf("tokens refused {reason=%q}: %v more; want %d, one per 401", tt.reason, got, len(paths))
			}
		})
	}
	if n, m := fb.reserves.Load(), fb.other.Load(); n+m != 0 {
		t.Fatalf("%d reservations and %d other requests reached the backend", n, m)
	}
	if n := testutil.ToFloat64(e.proxy.counts.subjectRefused); n != 0 {
		t.Errorf("subject refusals: %v; want none (no token was good)", n)
	}
}

// The edge's own answers are JSON, not HTML: a message naming "Bearer <JWT>" says so as it is.
func TestEdgeAnswersAreNotHTMLEscaped(t *testing.T) {
	e, _, _, _ := tokenEdge(t)
	a := e.do(t, "POST", "/quotas/deduct", `{}`)
	if want := `{"error":"UNAUTHORIZED","message":"a bearer token is required: Authorization: Bearer <JWT>"}`; a.status != 401 || a.body != want {
		t.Errorf("no token: %d %s; want 401 %s", a.status, a.body, want)
	}
}

// A good token for another customer or identity gets 403; 42 and "42" are one customer.
func TestTheTokensSubjectMustBeTheCustomer(t *testing.T) {
	e, fb, _, iss := tokenEdge(t)
	claims := iss.Claims("42")
	claims["device_id"] = []any{"d-9", "d-10"}
	tok := bearer(iss.Sign(t, "RS256", claims))
	forbidden := []struct{ method, uri, body string }{
		{"POST", "/vouchers/FLASH/reservations", reservation(`"43"`)},
		{"POST", "/vouchers/FLASH/reservations", reservation(`43`)},
		{"POST", "/vouchers/FLASH/reservations", reservation(`"042"`)},
		{"POST", "/vouchers/FLASH/reservations", `{"orderId":"o-1","orderAmount":1000}`},
		{"POST", "/vouchers/FLASH/reservations", `{"customerId":"42","customerId":"43","orderId":"o-1","orderAmount":1000}`},
		{"POST", "/vouchers/FLASH/reservations", `{"CustomerID":"43","customerId":"42","customerid":"43","orderId":"o-1","orderAmount":1000}`},
		{"POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"43","dimensions":["ITEM:1"]}]}`},
		{"POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"42","dimensions":["ITEM:1"]},{"identityType":"USER","identity":"43","dimensions":["ITEM:1"]}]}`},
		{"POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"42","IDENTITY":"43","dimensions":["ITEM:1"]}]}`},
		{"GET", "/quotas/usage?bizId=1&identityType=USER&identity=43", ""},
		{"POST", "/vouchers/FLASH/validate", reservation(`"43"`)},
		{"POST", "/quotas/check", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"43","dimensions":["ITEM:1"]}]}`},
		// another's device, a phone the token does not carry, a type no claim maps
		{"POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"DEVICE","identity":"d-victim","dimensions":["ITEM:1"]}]}`},
		{"POST", "/quotas/check", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"42","dimensions":["ITEM:1"]},{"identityType":"PHONE","identity":"+33600000000","dimensions":["ITEM:1"]}]}`},
		{"POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"CARD","identity":"42","dimensions":["ITEM:1"]}]}`},
		{"GET", "/quotas/usage?bizId=1&identityType=DEVICE&identity=d-victim", ""},
		{"GET", "/quotas/usage?bizId=1&identityType=PHONE&identity=42", ""},
		// a partial rollback's items, as a deduct's
		{"POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k","rollbackKey":"r","items":[{"identityType":"DEVICE","identity":"d-victim","dimensions":["ITEM:1"]}]}`},
		{"POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k","rollbackKey":"r","items":[{"identityType":"USER","identity":"42","dimensions":["ITEM:1"]},{"identityType":"USER","identity":"43","dimensions":["ITEM:1"]}]}`},
		{"POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k","rollbackKey":"r","items":[{"identityType":"PHONE","identity":"+33600000000","dimensions":["ITEM:1"]}]}`},
	}
	for _, tt := range forbidden {
		a := e.do(t, tt.method, tt.uri, tt.body, tok...)
		if a.status != 403 || errorCode(t, a) != "FORBIDDEN" {
			t.Errorf("%s %s %s: %d %s; want 403 FORBIDDEN", tt.method, tt.uri, tt.body, a.status, a.body)
		}
	}
	if n := testutil.ToFloat64(e.proxy.counts.subjectRefused); n != float64(len(forbidden)) {
		t.Errorf("subject refusals: %v; want %d, one per 403", n, len(forbidden))
	}
	for _, body := range []string{`not json`, `{"customerId":-1,"orderId":"o-1","orderAmount":1}`} {
		if a := e.do(t, "POST", "/vouchers/FLASH/reservations", body, tok...); a.status != 400 {
			t.Errorf("reservation %s: %d %s; want 400", body, a.status, a.body)
		}
	}
	if a := e.do(t, "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[],"extra":1}`, tok...); a.status != 400 {
		t.Errorf("deduct with an unknown field: %d %s; want 400", a.status, a.body)
	}
	if a := e.do(t, "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k","Items":[],"items":[],"extra":1}`, tok...); a.status != 400 {
		t.Errorf("rollback with an unknown field: %d %s; want 400", a.status, a.body)
	}
	if n, m := fb.reserves.Load(), fb.other.Load(); n+m != 0 {
		t.Fatalf("%d reservations and %d other requests reached the backend", n, m)
	}

	// The same customer, as a number or a string; the token's own devices.
	for i, body := range []string{reservation(`42`), reservation(`"42"`)} {
		body = strings.Replace(body, "o-1", "o-"+string(rune('a'+i)), 1)
		if a := e.do(t, "POST", "/vouchers/FLASH/reservations", body, tok...); a.status != 201 && a.status != 409 {
			t.Errorf("reservation %s: %d %s; want it forwarded", body, a.status, a.body)
		}
	}
	for _, tt := range []struct{ method, uri, body string }{
		{"POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"42","dimensions":["ITEM:1"]},{"identityType":"DEVICE","identity":"d-9","dimensions":["ITEM:1"]}]}`},
		{"GET", "/quotas/usage?bizId=1&identityType=DEVICE&identity=d-10", ""},
		{"GET", "/quotas/usage?bizId=1&identityType=USER&identity=42", ""},
		{"POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k"}`},
		{"POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k","rollbackKey":"r","items":[{"identityType":"DEVICE","identity":"d-10","dimensions":["ITEM:1"]}]}`},
	} {
		if a := e.do(t, tt.method, tt.uri, tt.body, tok...); a.status != 200 {
			t.Errorf("%s %s: %d %s; want the backend's 200", tt.method, tt.uri, a.status, a.body)
		}
	}
	if n, m := fb.reserves.Load(), fb.other.Load(); n != 2 || m != 5 {
		t.Fatalf("backend saw %d reservations and %d other requests; want 2 and 5", n, m)
	}
	// the backends are told the shopper: its subject and the identities its token carries, and
	// nothing of what a client sends in their place
	a := e.do(t, "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k"}`,
		append(tok, HeaderSubject, "43", HeaderIdentities, "DEVICE=d-victim")...)
	last := fb.lastReq.Load()
	if a.status != 200 || string(last.Header.Peek(HeaderSubject)) != "42" ||
		string(last.Header.Peek(HeaderIdentities)) != "DEVICE=d-9&DEVICE=d-10" {
		t.Errorf("the backend got %s=%q %s=%q (answer %d); want 42 and DEVICE=d-9&DEVICE=d-10", HeaderSubject,
			last.Header.Peek(HeaderSubject), HeaderIdentities, last.Header.Peek(HeaderIdentities), a.status)
	}
	if n := testutil.ToFloat64(e.proxy.counts.subjectRefused); n != float64(len(forbidden)) {
		t.Errorf("subject refusals after the good calls: %v; want still %d", n, len(forbidden))
	}
}

// What a backend gets with a good token: the subject in X-VG-Subject, the edge's key, never
// the shopper's token or a client's X-VG-Subject or X-API-Key. The checkout API gets the
// shopper's Authorization as sent, and no X-VG-Subject either.
func TestBackendsGetTheSubjectAndTheEdgesKey(t *testing.T) {
	e, fb, co, iss := tokenEdge(t)
	tok := iss.Sign(t, "ES256", iss.Claims("42"))
	forged := []string{"Authorization", "Bearer " + tok, "X-VG-Subject", "43", "X_VG_Subject", "43", "x-vg-subject", "44", "X-API-Key", "stolen"}

	for _, tt := range []struct{ method, uri, body string }{
		{"POST", "/vouchers/FLASH/reservations", reservation(`"42"`)},
		{"POST", "/vouchers/FLASH/reservations/o-1/confirm", ""},
		{"DELETE", "/vouchers/FLASH/reservations/o-1", ""},
		{"POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k"}`},
	} {
		a := e.do(t, tt.method, tt.uri, tt.body, forged...)
		if a.status >= 400 {
			t.Fatalf("%s %s: %d %s", tt.method, tt.uri, a.status, a.body)
		}
		got := headerNames(fb.lastReq.Load())
		want := map[string]string{"x-vg-subject": "42", "authorization": "Bearer " + edgeKey}
		for name, v := range want {
			if got[name] != v {
				t.Errorf("%s %s: backend got %s %q; want %q", tt.method, tt.uri, name, got[name], v)
			}
		}
		for _, name := range []string{"x_vg_subject", "x-api-key"} {
			if v, ok := got[name]; ok {
				t.Errorf("%s %s: backend got %s %q", tt.method, tt.uri, name, v)
			}
		}
		if n := len(fb.lastReq.Load().Header.PeekAll("X-Vg-Subject")); n != 1 {
			t.Errorf("%s %s: backend got %d X-VG-Subject headers", tt.method, tt.uri, n)
		}
	}

	if a := e.do(t, "GET", "/cart", "", forged...); a.status != 418 {
		t.Fatalf("checkout: %d %s", a.status, a.body)
	}
	got := headerNames(co.last.Load())
	if got["authorization"] != "Bearer "+tok || got["x-api-key"] != "stolen" {
		t.Errorf("checkout API got Authorization %q, X-API-Key %q; want them as sent", got["authorization"], got["x-api-key"])
	}
	for _, name := range []string{"x-vg-subject", "x_vg_subject"} {
		if v, ok := got[name]; ok {
			t.Errorf("checkout API got %s %q", name, v)
		}
	}
	// /healthz needs no token.
	if a := e.do(t, "GET", "/healthz", ""); a.status != 200 {
		t.Errorf("/healthz without a token: %d %s", a.status, a.body)
	}
}

// With tokens off, a client's X-VG-Subject is still dropped; the service key alone replaces
// Authorization toward the backends; with neither, Authorization passes as before.
func TestClientSubjectIsDroppedWithTokensOff(t *testing.T) {
	fb := newFakeBackend(map[string]int{"FLASH": 5})
	beAddr, _ := testkit.ServeHTTP(t, fb.handle)
	for _, tt := range []struct {
		apiKey, wantAuth string
	}{{"", "Bearer shopper"}, {edgeKey, "Bearer " + edgeKey}} {
		e := startEdge(t, edgeConfig{backends: []string{beAddr}, apiKey: tt.apiKey})
		a := e.do(t, "POST", "/vouchers/FLASH/reservations/o-1/confirm", "",
			"Authorization", "Bearer shopper", "X-VG-Subject", "43", "X_Vg_Subject", "43")
		if a.status != 200 {
			t.Fatalf("confirm: %d %s", a.status, a.body)
		}
		got := headerNames(fb.lastReq.Load())
		for _, name := range []string{"x-vg-subject", "x_vg_subject"} {
			if v, ok := got[name]; ok {
				t.Errorf("key %q: backend got %s %q", tt.apiKey, name, v)
			}
		}
		if got["authorization"] != tt.wantAuth {
			t.Errorf("key %q: backend got Authorization %q; want %q", tt.apiKey, got["authorization"], tt.wantAuth)
		}
	}
}

// With tokens on, a new order of a voucher known to be sold out is answered 409 from memory
// before any token is checked (that answer takes nothing and tells nothing, and the shield keeps
// its cost under a flood); a holder's retry, which goes on to the backend, needs a good token
// for its own customer.
func TestSoldOutAnswersComeBeforeTheToken(t *testing.T) {
	e, fb, _, iss := tokenEdge(t)
	if err := e.cache.Apply(soldOutState("FLASH", "42/granted-1")); err != nil {
		t.Fatal(err)
	}
	tok := bearer(iss.Sign(t, "RS256", iss.Claims("42")))
	for _, tt := range []struct {
		name    string
		headers []string
	}{{"no token", nil}, {"a good token", tok}, {"a forged token", []string{"Authorization", "Bearer e30.e30.c2ln"}}} {
		if a := e.do(t, "POST", "/vouchers/FLASH/reservations", reservation(`43`), tt.headers...); a.status != 409 || errorCode(t, a) != "OUT_OF_STOCK" {
			t.Errorf("new order, %s: %d %s; want 409 OUT_OF_STOCK from memory", tt.name, a.status, a.body)
		}
		if a := e.do(t, "POST", "/vouchers/FLASH/validate", reservation(`43`), tt.headers...); a.status != 200 || a.body != `{"valid":false,"error":"OUT_OF_STOCK"}` {
			t.Errorf("validate of a new order, %s: %d %s; want 200 OUT_OF_STOCK from memory", tt.name, a.status, a.body)
		}
	}
	if n := testutil.CollectAndCount(e.proxy.counts.tokensRefused); n != 0 {
		t.Errorf("tokens refused before the sold-out answers: %d reasons counted; want none", n)
	}
	// A holder's retry with its own customer's token goes through, with the subject.
	held := `{"customerId":"42","orderId":"granted-1","orderAmount":1000}`
	if a := e.do(t, "POST", "/vouchers/FLASH/reservations", held, tok...); a.status == 401 || a.status == 403 || a.status == 409 {
		t.Errorf("holder's retry: %d %s", a.status, a.body)
	}
	if n := fb.reserves.Load(); n != 1 || string(fb.lastReq.Load().Header.Peek(HeaderSubject)) != "42" {
		t.Fatalf("%d reservations reached the backend; want the holder's retry, with its subject", n)
	}
	if n := testutil.ToFloat64(e.proxy.counts.holderForwards); n != 1 {
		t.Errorf("holder forwards: %v; want 1, the holder's retry", n)
	}
}

// On a voucher the edge holds sold out or paused, every request about an orderId another
// customer holds that is not that customer's own verified retry (no token, a bad one, another
// customer's, another customer named, a body the backend would refuse, a dry run) is answered
// exactly as the same request about an orderId nobody holds: the same status, body and header,
// from memory, none of them reaching the backend, none of them counted as a token refused. The
// answer must not tell that someone holds the orderId.
func TestAnothersHeldOrderIsAnsweredAsANewOne(t *testing.T) {
	e, fb, _, iss := tokenEdge(t)
	tok42, tok43 := bearer(iss.Sign(t, "RS256", iss.Claims("42"))), bearer(iss.Sign(t, "RS256", iss.Claims("43")))
	expired := iss.Claims("42")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	forged := testkit.NewTokenIssuer(t)
	body := func(customer, order string) string {
		return `{"customerId":` + customer + `,"orderId":"` + order + `","orderAmount":1000}`
	}
	cases := []struct {
		name, customer string
		headers        []string
		badBody        bool
	}{
		{"another shopper with its token", "43", tok43, false},
		{"no token", "42", nil, false},
		{"an expired token of the holder", "42", bearer(iss.Sign(t, "RS256", expired)), false},
		{"a forged token of the holder", "42", bearer(forged.Sign(t, "RS256", forged.Claims("42"))), false},
		{"another shopper naming the holder", "42", tok43, false},
		{"the holder with a body the backend refuses", "42", tok42, true},
	}
	for _, state := range []events.VoucherState{soldOutState("FLASH", "42/granted-1"), pausedState("FLASH", false, "42/granted-1")} {
		if err := e.cache.Apply(state); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/vouchers/FLASH/reservations", "/vouchers/FLASH/validate"} {
			for _, tt := range cases {
				send := func(order string) answerOf {
					b := body(tt.customer, order)
					if tt.badBody {
						b = strings.Replace(b, "1000", `"1000"`, 1)
					}
					return e.do(t, "POST", path, b, append(tt.headers, "X-Request-Id", "probe-1")...)
				}
				a, n := send("granted-1"), send("nobodys-1")
				if a.status != n.status || a.body != n.body || a.header.String() != n.header.String() {
					t.Errorf("paused %v, %s, %s: the held orderId got %d %s\n%s; one nobody holds %d %s\n%s; want the same",
						state.Paused, path, tt.name, a.status, a.body, a.header, n.status, n.body, n.header)
				}
			}
		}
	}
	if n, m := fb.reserves.Load(), fb.other.Load(); n+m != 0 {
		t.Errorf("%d reservations and %d other requests reached the backend; want none", n, m)
	}
	if n := testutil.CollectAndCount(e.proxy.counts.tokensRefused); n != 0 {
		t.Errorf("tokens refused: %d reasons counted; want none (each was answered as a new order)", n)
	}
	if n := testutil.ToFloat64(e.proxy.counts.holderForwards); n != 0 {
		t.Errorf("holder forwards: %v; want none", n)
	}
}

// A filter from a backend that kept client orderIds alone cannot tell a shopper's own order
// from another's: the shopper's retry of an orderId it holds still goes to the backend.
func TestAFilterWithoutScopesForwardsTheShoppersRetry(t *testing.T) {
	e, fb, _, iss := tokenEdge(t)
	raw, err := soldOutState("FLASH", "granted-1").Encode()
	if err != nil {
		t.Fatal(err)
	}
	state, err := events.DecodeVoucherState([]byte(strings.Replace(string(raw), `,"scoped":true`, "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cache.Apply(state); err != nil {
		t.Fatal(err)
	}
	a := e.do(t, "POST", "/vouchers/FLASH/reservations", `{"customerId":"42","orderId":"granted-1","orderAmount":1000}`,
		bearer(iss.Sign(t, "RS256", iss.Claims("42")))...)
	if a.status == 409 || fb.reserves.Load() != 1 {
		t.Errorf("the holder's retry under a filter without scopes: %d %s, %d reservations forwarded; want it forwarded", a.status, a.body, fb.reserves.Load())
	}
	// A shopper's reservation decoded before (one that waited for a backend slot while the
	// voucher sold out) is looked up in the shopper's scope; a filter without scopes cannot tell
	// it, and its client orderId decides: a new order is answered from memory, a holder's goes on.
	for order, want := range map[string]memory{"fresh-1": answered, "granted-1": mayHold} {
		var ctx fasthttp.RequestCtx
		req := wire.ReserveRequest{CustomerID: "42", OrderID: order}
		if got := e.proxy.fromMemory(&ctx, []byte("FLASH"), &req, false); got != want {
			t.Errorf("%s decoded, under a filter without scopes: %d; want %d", order, got, want)
		}
	}
}
