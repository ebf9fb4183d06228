package app_test

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// Shoppers' tokens checked by the edge command with its keys from an identity provider's JWKS
// URL (a local HTTPS server, trusted through SSL_CERT_FILE as an operator's roots would be): a
// token of the provider's key is verified and its reservation reaches the backend; one whose
// header has crit, or that names a kid the provider never published, is refused 401 by the edge
// at once, each counted under its reason in vg_edge_tokens_refused_total.
func TestStrictTokensAndAJWKSURLThroughTheEdge(t *testing.T) {
	iss := testkit.NewTokenIssuer(t)
	idpURL, roots := identityProvider(t, func() []byte { return iss.JWKS(true) })
	cfg, b := keyedBackend(t)
	b.CreateVoucher(t, backendtest.Voucher{Code: "IDP", Discount: 100, TotalLimit: 10})
	ops := freeAddr(t)
	e := backendtest.StartEdgeProcess(t, cfg, b.Addr,
		"SSL_CERT_FILE="+roots, "VG_EDGE_OPS_ADDR="+ops, "VG_EDGE_API_KEY="+tokenEdgeKey,
		"VG_EDGE_JWT_JWKS_URL="+idpURL+"/.well-known/jwks.json", "VG_EDGE_JWT_ALGS=RS256",
		"VG_EDGE_JWT_AUDIENCE="+iss.Audience, "VG_EDGE_JWT_ISSUER="+iss.Issuer,
		"VG_EDGE_JWT_JWKS_REFRESH=1s", "VG_EDGE_JWT_JWKS_WAIT=5s", // a refresh under the wait
	)
	reserve := func(order, tok string) (int, string, time.Duration) {
		t.Helper()
		return reserveWithToken(t, e.URL(), "IDP", "1001", order, tok)
	}

	if status, body, _ := reserve("idp-1", iss.Sign(t, "RS256", iss.Claims("1001"))); status != 201 {
		t.Fatalf("a token of the provider's key: %d %s; want 201, verified with the key from the URL", status, body)
	}

	crit := jwt.NewWithClaims(jwt.SigningMethodRS256, iss.Claims("1001"))
	crit.Header["kid"], crit.Header["crit"] = "rsa", []string{"exp"}
	critTok, err := crit.SignedString(iss.RSA)
	if err != nil {
		t.Fatal(err)
	}
	if status, body, _ := reserve("idp-2", critTok); status != 401 {
		t.Fatalf("a token with crit: %d %s; want 401", status, body)
	}

	good := iss.Sign(t, "RS256", iss.Claims("1001"))
	for i := range 5 { // made-up kids: refused at once, none waits for the fetch limit (1 s)
		head := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"alg":"RS256","kid":"made-up-%d","typ":"JWT"}`, i)))
		forged := head + good[strings.IndexByte(good, '.'):]
		status, body, took := reserve(fmt.Sprintf("idp-forged-%d", i), forged)
		if status != 401 {
			t.Fatalf("a token naming an unknown kid: %d %s; want 401", status, body)
		}
		if took > 500*time.Millisecond {
			t.Fatalf("a token naming an unknown kid answered after %v; want at once", took)
		}
	}

	m := testkit.ScrapeMetrics(t, "http://"+ops+"/metrics")
	if got := m.Count(t, "vg_edge_tokens_refused_total", "reason", "critical"); got != 1 {
		t.Errorf("vg_edge_tokens_refused_total{reason=\"critical\"} = %v; want 1", got)
	}
	if got := m.Count(t, "vg_edge_tokens_refused_total", "reason", "signature"); got != 5 {
		t.Errorf("vg_edge_tokens_refused_total{reason=\"signature\"} = %v; want 5, the unknown kids", got)
	}
	b.CheckInvariants(t, "IDP", []string{wire.ShopperOrderID("1001", "idp-1")}) // a shopper's order, in its scope
}

// reserveWithToken asks the edge at url for a reservation of code by customer, with tok as the
// shopper's token, and returns the answer and how long it took.
func reserveWithToken(t *testing.T, url, code, customer, order, tok string) (int, string, time.Duration) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/vouchers/"+code+"/reservations",
		strings.NewReader(fmt.Sprintf(`{"customerId":%q,"orderId":%q,"orderAmount":100000}`, customer, order)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), time.Since(start)
}

// The identity provider rotates its signing key (a new kid published, the old one removed) and
// the edge command follows within its refresh interval (VG_EDGE_JWT_JWKS_REFRESH, 2 s here):
// the old key's tokens are refused and the new key's verified. A kid the edge holds never
// fetches the set, and the fetch for unknown kids was spent just before the rotation, so only
// the refresh can bring the change.
func TestTheEdgeFollowsTheProvidersKeyRotationWithinItsRefresh(t *testing.T) {
	const refresh = 2 * time.Second
	oldKey, newKey := testkit.NewTokenIssuer(t), testkit.NewTokenIssuer(t)
	var published atomic.Pointer[[]byte]
	publish := func(kid string, key *testkit.TokenIssuer) {
		set := rsaJWKS(kid, key)
		published.Store(&set)
	}
	publish("2026-old", oldKey)
	idpURL, roots := identityProvider(t, func() []byte { return *published.Load() })
	cfg, b := keyedBackend(t)
	b.CreateVoucher(t, backendtest.Voucher{Code: "ROTATE", Discount: 100, TotalLimit: 1000})
	e := backendtest.StartEdgeProcess(t, cfg, b.Addr, "SSL_CERT_FILE="+roots, "VG_EDGE_API_KEY="+tokenEdgeKey,
		"VG_EDGE_JWT_JWKS_URL="+idpURL+"/jwks.json", "VG_EDGE_JWT_ALGS=RS256",
		"VG_EDGE_JWT_AUDIENCE="+oldKey.Audience, "VG_EDGE_JWT_ISSUER="+oldKey.Issuer,
		"VG_EDGE_JWT_JWKS_REFRESH="+refresh.String(), "VG_EDGE_JWT_JWKS_WAIT=5s")
	orders := 0
	verified := func(kid string, key *testkit.TokenIssuer) bool {
		t.Helper()
		orders++
		customer := fmt.Sprint(2000 + orders)
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, key.Claims(customer))
		tok.Header["kid"] = kid
		signed, err := tok.SignedString(key.RSA)
		if err != nil {
			t.Fatal(err)
		}
		status, body, _ := reserveWithToken(t, e.URL(), "ROTATE", customer, fmt.Sprint("rot-", orders), signed)
		if status != 201 && status != 401 {
			t.Fatalf("reservation with the %s key: %d %s; want 201 (verified) or 401", kid, status, body)
		}
		return status == 201
	}
	if !verified("2026-old", oldKey) {
		t.Fatal("a token of the provider's key was refused")
	}
	if verified("2026-new", newKey) { // spends the fetch for unknown kids: the set has no such key yet
		t.Fatal("a token of a key the provider has not published was verified")
	}
	publish("2026-new", newKey)
	rotated := time.Now()
	for verified("2026-old", oldKey) {
		if time.Since(rotated) > refresh+time.Second {
			t.Fatalf("the removed key's tokens were still verified %v after the rotation; want refused within the refresh interval (%v)", time.Since(rotated).Round(time.Millisecond), refresh)
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(rotated)
	if !verified("2026-new", newKey) {
		t.Fatalf("the old key refused %v after the rotation, but the new key's tokens are not verified", took.Round(time.Millisecond))
	}
	t.Logf("rotation followed %v after it was published (refresh interval %v)", took.Round(time.Millisecond), refresh)
}

// rsaJWKS is a JWK Set of issuer's RSA key alone, under kid.
func rsaJWKS(kid string, issuer *testkit.TokenIssuer) []byte {
	b64 := base64.RawURLEncoding.EncodeToString
	pub := issuer.RSA.PublicKey
	set, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": kid, "alg": "RS256", "n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}}})
	return set
}

// identityProvider serves the JWK Set jwks returns over HTTPS until the test ends, and returns
// its URL and a PEM file of its certificate, trusted through SSL_CERT_FILE as an operator's
// roots would be.
func identityProvider(t *testing.T, jwks func() []byte) (url, roots string) {
	t.Helper()
	idp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks())
	}))
	t.Cleanup(idp.Close)
	roots = filepath.Join(t.TempDir(), "roots.pem")
	writeFile(t, roots, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: idp.Certificate().Raw}))
	return idp.URL, roots
}

// tokenEdgeKey is the service key keyedBackend gives the edge.
const tokenEdgeKey = "edge-key-0123456789abcdef0123456789abcdef"

// keyedBackend starts a backend that takes tokenEdgeKey with the edge's scopes, so that it trusts
// the subject the edge verified.
func keyedBackend(t *testing.T) (config.Backend, *backendtest.Backend) {
	t.Helper()
	cfg := backendtest.Config(t)
	cfg.APIKeysFile = filepath.Join(t.TempDir(), "keys.yaml")
	backendtest.WriteKeys(t, cfg.APIKeysFile, backendtest.APIKey{Name: "edge", Secret: tokenEdgeKey,
		Scopes: []string{"reserve", "quota", "read", "edge"}})
	return cfg, backendtest.Start(t, cfg)
}
