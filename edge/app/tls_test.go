package app_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/backendtest"
	"vouchergate/edge/app"
	"vouchergate/shared/config"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// Issue 14: TLS and shoppers' tokens at the edge, as the edge command builds them.

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key as PEM files, and
// returns their paths and a pool that trusts the certificate.
func selfSigned(t testing.TB) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vouchergate edge test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "edge.pem"), filepath.Join(dir, "edge-key.pem")
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// secureConfig turns on TLS, shoppers' tokens of iss and a service key in cfg.
func secureConfig(t *testing.T, cfg config.Edge, iss *testkit.TokenIssuer) (config.Edge, *x509.CertPool) {
	t.Helper()
	certFile, keyFile, roots := selfSigned(t)
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	writeFile(t, jwks, iss.JWKS(true))
	cfg.TLSCertFile, cfg.TLSKeyFile = certFile, keyFile
	cfg.JWTJWKSFile, cfg.JWTAlgs, cfg.JWTAudience, cfg.JWTIssuer, cfg.JWTLeeway = jwks, []string{"RS256", "ES256"}, iss.Audience, iss.Issuer, 30*time.Second
	cfg.APIKey = "vg_edge_key"
	cfg.MaxConnsPerIP, cfg.MaxClientConns = 64, 256 // the caps on, as by default
	return cfg, roots
}

// tlsDo sends one request to the edge over TLS, trusting roots.
func tlsDo(t *testing.T, addr string, roots *x509.CertPool, method, path, body string, headers ...string) (int, string) {
	t.Helper()
	c := &fasthttp.HostClient{Addr: addr, IsTLS: true, TLSConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"},
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("https://" + addr + path)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if body != "" {
		req.SetBodyString(body)
		req.Header.SetContentType("application/json")
	}
	if err := c.DoTimeout(req, resp, 10*time.Second); err != nil {
		t.Fatalf("%s %s over TLS: %v", method, path, err)
	}
	return resp.StatusCode(), string(resp.Body())
}

// The public listener speaks HTTP/1.1 over TLS with a configured certificate: the same proxy
// behaviour (tokens checked, the subject and the edge's key upstream, X-Forwarded-Proto:
// https, bare LF refused); a plain-HTTP client and a client that does not trust the
// certificate get no answer.
func TestTLSAtTheEdge(t *testing.T) {
	var last atomic.Pointer[fasthttp.Request]
	backend, _ := testkit.ServeHTTP(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/healthz" {
			return
		}
		var r fasthttp.Request
		ctx.Request.CopyTo(&r)
		last.Store(&r)
		ctx.SetStatusCode(201)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"orderId":"o-1","discountAmount":100}`)
	})
	iss := testkit.NewTokenIssuer(t)
	cfg, roots := secureConfig(t, edgeConfig(testkit.NATSURL, testkit.NATSPrefix(), backend), iss)
	e := startEdge(t, cfg)

	tok := "Bearer " + iss.Sign(t, "ES256", iss.Claims("42"))
	status, body := tlsDo(t, e.Addr, roots, "POST", "/vouchers/FLASH/reservations",
		`{"customerId":42,"orderId":"o-1","orderAmount":1000}`, "Authorization", tok, "X-VG-Subject", "43")
	if status != 201 {
		t.Fatalf("reservation over TLS: %d %s; want the backend's 201", status, body)
	}
	got := last.Load()
	for name, want := range map[string]string{"X-Forwarded-Proto": "https", "X-Vg-Subject": "42", "Authorization": "Bearer vg_edge_key"} {
		if v := string(got.Header.Peek(name)); v != want {
			t.Errorf("backend got %s %q; want %q", name, v, want)
		}
	}
	if status, body := tlsDo(t, e.Addr, roots, "POST", "/vouchers/FLASH/reservations",
		`{"customerId":43,"orderId":"o-2","orderAmount":1000}`, "Authorization", tok); status != 403 {
		t.Errorf("another customer's reservation over TLS: %d %s; want 403", status, body)
	}
	if got := testkit.ScrapeMetrics(t, "http://"+e.Ops+"/metrics").Count(t, "vg_edge_subject_refused_total"); got != 1 {
		t.Errorf("edge's subject refusals: %v; want 1, the 403", got)
	}
	if status, _ := tlsDo(t, e.Addr, roots, "GET", "/healthz", ""); status != 200 {
		t.Errorf("/healthz over TLS: %d", status)
	}

	// The bare-LF check still looks at the (decrypted) header, of a kept-alive connection's next
	// request too, under the per-address cap.
	conn, err := tls.Dial("tcp", e.Addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	_, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: edge\r\n\r\n")
	if resp, err := http.ReadResponse(r, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz over a raw TLS connection: %v %v", resp, err)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	_, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\nHost: edge\n\n")
	if line, _ := r.ReadString('\n'); !strings.HasPrefix(line, "HTTP/1.1 400 ") {
		t.Errorf("bare LF over TLS: %q; want 400", line)
	}

	// Plain HTTP on the TLS port: no HTTP answer.
	plain := &fasthttp.HostClient{Addr: e.Addr, ReadTimeout: 5 * time.Second}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	req.SetRequestURI("http://" + e.Addr + "/healthz")
	if err := plain.DoTimeout(req, resp, 5*time.Second); err == nil {
		t.Errorf("plain HTTP to the TLS listener answered %d %q", resp.StatusCode(), resp.Body())
	}
	// A client that does not trust the certificate refuses the connection.
	if c, err := tls.Dial("tcp", e.Addr, &tls.Config{ServerName: "127.0.0.1"}); err == nil {
		c.Close()
		t.Error("a client without the test root trusted the edge's certificate")
	}
}

// Against a real backend with service keys, the edge holding its key (scopes reserve, quota,
// read, edge): a shopper's token reserves and confirms their own order through the edge over
// TLS; another shopper's token can neither reserve for them nor release their reservation (to
// it, a shopper's order is no order at all: the backend keeps orders in their shopper's scope),
// nor deduct from, roll back (the idemKey is alice's own) or read their quota. The edge learns a sell-out through its own state read (its NATS subjects are not the
// backend's), which the backend takes with the edge's key. Every refusal is counted where it
// was made, and the edge's log holds neither its key nor a shopper's token.
func TestTokensThroughARealBackend(t *testing.T) {
	bcfg := backendtest.Config(t)
	bcfg.APIKeysFile = filepath.Join(t.TempDir(), "keys.yaml")
	const edgeKey = "edge-key-0123456789abcdef0123456789abcdef"
	backendtest.WriteKeys(t, bcfg.APIKeysFile, backendtest.APIKey{Name: "edge", Secret: edgeKey,
		Scopes: []string{"reserve", "quota", "read", "edge"}})
	b := backendtest.Start(t, bcfg)
	b.CreateVoucher(t, backendtest.Voucher{Code: "TOKENS", Discount: 100, TotalLimit: 10})
	b.CreateVoucher(t, backendtest.Voucher{Code: "LAST", Discount: 100, TotalLimit: 1, FlashSale: true})
	iss := testkit.NewTokenIssuer(t)
	// NATS subjects of the edge's own: the backend's sold-out events never reach it.
	cfg, roots := secureConfig(t, edgeConfig(bcfg.NATSURL, testkit.NATSPrefix(), b.Addr), iss)
	cfg.APIKey = edgeKey
	log, logged := testkit.CaptureLog()
	e := startEdge(t, cfg, app.WithLog(log))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("edge log:\n%s", logged())
		}
	})

	aliceToken := iss.Sign(t, "RS256", iss.Claims("1001"))
	malloryToken := iss.Sign(t, "RS256", iss.Claims("666"))
	alice, mallory := "Bearer "+aliceToken, "Bearer "+malloryToken
	order := `{"customerId":1001,"orderId":"tok-1","orderAmount":100000}`
	if status, body := tlsDo(t, e.Addr, roots, "POST", "/vouchers/TOKENS/reservations", order, "Authorization", mallory); status != 403 {
		t.Fatalf("mallory reserving for alice: %d %s; want 403", status, body)
	}
	if status, body := tlsDo(t, e.Addr, roots, "POST", "/vouchers/TOKENS/reservations", order); status != 401 {
		t.Fatalf("no token: %d %s; want 401", status, body)
	}
	if status, body := tlsDo(t, e.Addr, roots, "POST", "/vouchers/TOKENS/reservations", order, "Authorization", alice); status != 201 {
		t.Fatalf("alice's reservation: %d %s; want 201", status, body)
	}
	if status, body := tlsDo(t, e.Addr, roots, "DELETE", "/vouchers/TOKENS/reservations/tok-1", "", "Authorization", mallory); status != 404 {
		t.Fatalf("mallory releasing alice's reservation: %d %s; want 404, as for no reservation", status, body)
	}
	if status, body := tlsDo(t, e.Addr, roots, "POST", "/vouchers/TOKENS/reservations/tok-1/confirm", "", "Authorization", alice); status != 200 {
		t.Fatalf("alice's confirm: %d %s; want 200", status, body)
	}

	// Quotas: mallory can neither deduct from alice's quota nor roll back alice's deduct.
	if st, body := b.Do(t, "POST", "/admin/quota-rules",
		`{"bizId":7,"identityType":"USER","dimension":"*","limit":3,"window":{"type":"DAY","timezone":"UTC"}}`); st != 201 {
		t.Fatalf("create a quota rule: %d %s", st, body)
	}
	testkit.Eventually(t, "the rule loaded", func() bool { return b.App.Quotas.Metrics().Rules == 1 })
	deduct := `{"bizId":7,"idemKey":"tok-q1","items":[{"identityType":"USER","identity":"1001","dimensions":["ITEM:1"]}]}`
	if status, body := tlsDo(t, e.Addr, roots, "POST", "/quotas/deduct", deduct, "Authorization", mallory); status != 403 {
		t.Fatalf("mallory deducting from alice's quota: %d %s; want 403", status, body)
	}
	if status, body := tlsDo(t, e.Addr, roots, "POST", "/quotas/deduct", deduct, "Authorization", alice); status != 200 {
		t.Fatalf("alice's deduct: %d %s; want 200", status, body)
	}
	rollback := `{"bizId":7,"idemKey":"tok-q1"}`
	if status, body := tlsDo(t, e.Addr, roots, "POST", "/quotas/rollback", rollback, "Authorization", mallory); status != 200 || body != `{"idemKey":"tok-q1","returned":[]}` {
		t.Fatalf("mallory rolling back alice's deduct: %d %s; want 200 giving back nothing (her idemKey is not mallory's)", status, body)
	}
	const usage = "/quotas/usage?bizId=7&identityType=USER&identity=1001&dimension=ITEM:1"
	if status, body := tlsDo(t, e.Addr, roots, "GET", usage, "", "Authorization", mallory); status != 403 {
		t.Fatalf("mallory reading alice's usage: %d %s; want 403", status, body)
	}
	used := func() int64 { // alice's counter, read through the edge with her token
		t.Helper()
		status, body := tlsDo(t, e.Addr, roots, "GET", usage, "", "Authorization", alice)
		var u wire.QuotaUsageResponse
		if err := json.Unmarshal([]byte(body), &u); status != 200 || err != nil || len(u.Counters) != 1 {
			t.Fatalf("alice's usage: %d %s (%v); want 200 with one counter", status, body, err)
		}
		return u.Counters[0].Used
	}
	if n := used(); n != 1 {
		t.Fatalf("alice's usage after mallory's rollback: %d; want her deduct still counted (1)", n)
	}
	if status, body := tlsDo(t, e.Addr, roots, "POST", "/quotas/rollback", rollback, "Authorization", alice); status != 200 {
		t.Fatalf("alice's rollback: %d %s; want 200", status, body)
	}
	if n := used(); n != 0 {
		t.Fatalf("alice's usage after her rollback: %d; want 0", n)
	}

	// A sell-out learned from a 409 passing through: the edge reads the state with its key.
	bob := "Bearer " + iss.Sign(t, "RS256", iss.Claims("1002"))
	if status, body := tlsDo(t, e.Addr, roots, "POST", "/vouchers/LAST/reservations",
		`{"customerId":1001,"orderId":"last-1","orderAmount":100000}`, "Authorization", alice); status != 201 {
		t.Fatalf("alice takes the last use: %d %s; want 201", status, body)
	}
	if status, body := tlsDo(t, e.Addr, roots, "POST", "/vouchers/LAST/reservations",
		`{"customerId":1002,"orderId":"last-2","orderAmount":100000}`, "Authorization", bob); status != 409 {
		t.Fatalf("bob after the sell-out: %d %s; want the backend's 409", status, body)
	}
	testkit.Eventually(t, "the edge to read LAST's sold-out state", func() bool {
		entry, _ := e.App.Cache.Lookup([]byte("LAST"), time.Now())
		return entry != nil
	})
	if status, body := tlsDo(t, e.Addr, roots, "POST", "/vouchers/LAST/reservations",
		`{"customerId":1003,"orderId":"last-3","orderAmount":100000}`); status != 409 {
		t.Errorf("a new order once the edge knows: %d %s; want 409 from memory, before the token", status, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer cancel()
	if status, body, err := e.App.Pool.Fetch(ctx, "/vouchers/LAST/state"); err != nil || status != 200 {
		t.Errorf("the edge's state read: %d %s %v; want 200", status, body, err)
	}

	bm := testkit.ScrapeMetrics(t, b.OpsURL+"/metrics")
	for reason, want := range map[string]float64{"missing": 0, "unknown": 0, "scope": 0, "subject_untrusted": 0,
		"subject_mismatch": 0} { // the edge refused mallory's reserve, deduct and usage; her release and rollback met nothing of alice's
		if got := bm.Count(t, "vouchergate_api_key_refusals_total", "reason", reason); got != want {
			t.Errorf("backend's key refusals {reason=%q}: %v; want %v", reason, got, want)
		}
	}
	em := testkit.ScrapeMetrics(t, "http://"+e.Ops+"/metrics")
	if got := em.Count(t, "vg_edge_subject_refused_total"); got != 3 { // reserve, deduct, usage
		t.Errorf("edge's subject refusals: %v; want 3", got)
	}
	if got := em.Count(t, "vg_edge_tokens_refused_total", "reason", "missing"); got != 1 {
		t.Errorf("edge's token refusals {reason=\"missing\"}: %v; want 1", got)
	}
	if got := em.Value(t, "vg_edge_nats_states_total"); got != 0 {
		t.Errorf("the edge heard %v states from NATS; want the sell-out learned only by its state read", got)
	}

	out := logged()
	for name, secret := range map[string]string{"the edge's key": edgeKey, "alice's token": aliceToken,
		"mallory's token": malloryToken, "a token's signature": aliceToken[strings.LastIndexByte(aliceToken, '.')+1:]} {
		if strings.Contains(out, secret) {
			t.Errorf("the edge logged %s", name)
		}
	}
}

// A certificate, key or JWKS file that cannot be used stops the edge at start, naming the
// variable to fix.
func TestUnusableSecurityFilesStopTheStart(t *testing.T) {
	iss := testkit.NewTokenIssuer(t)
	good, _ := secureConfig(t, edgeConfig(testkit.NATSURL, testkit.NATSPrefix(), "127.0.0.1:1"), iss)
	noJWK := filepath.Join(t.TempDir(), "empty.json")
	writeFile(t, noJWK, []byte(`{"keys":[]}`))
	for _, tt := range []struct {
		name   string
		change func(*config.Edge)
		want   string
	}{
		{"missing certificate", func(c *config.Edge) { c.TLSCertFile = "/nonexistent/edge.pem" }, "VG_EDGE_TLS_CERT_FILE"},
		{"key of another certificate", func(c *config.Edge) { _, c.TLSKeyFile, _ = selfSigned(t) }, "VG_EDGE_TLS_KEY_FILE"},
		{"missing JWKS", func(c *config.Edge) { c.JWTJWKSFile = "/nonexistent/jwks.json" }, "VG_EDGE_JWT_JWKS_FILE"},
		{"JWKS without keys", func(c *config.Edge) { c.JWTJWKSFile = noJWK }, "VG_EDGE_JWT_JWKS_FILE"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.change(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a, err := app.New(ctx, cfg, app.WithLog(testkit.QuietLog))
			if err == nil {
				a.Close()
				t.Fatalf("the edge started")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want one naming %s", err, tt.want)
			}
		})
	}
}
