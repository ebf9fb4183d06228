package app_test

import (
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"vouchergate/backend/backendtest"
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
	idp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(iss.JWKS(true))
	}))
	t.Cleanup(idp.Close)
	roots := filepath.Join(t.TempDir(), "roots.pem")
	writeFile(t, roots, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: idp.Certificate().Raw}))

	cfg := backendtest.Config(t)
	cfg.APIKeysFile = filepath.Join(t.TempDir(), "keys.yaml")
	const edgeKey = "edge-key-0123456789abcdef0123456789abcdef"
	backendtest.WriteKeys(t, cfg.APIKeysFile, backendtest.APIKey{Name: "edge", Secret: edgeKey,
		Scopes: []string{"reserve", "quota", "read", "edge"}})
	b := backendtest.Start(t, cfg)
	b.CreateVoucher(t, backendtest.Voucher{Code: "IDP", Discount: 100, TotalLimit: 10})
	ops := freeAddr(t)
	e := backendtest.StartEdgeProcess(t, cfg, b.Addr,
		"SSL_CERT_FILE="+roots, "VG_EDGE_OPS_ADDR="+ops, "VG_EDGE_API_KEY="+edgeKey,
		"VG_EDGE_JWT_JWKS_URL="+idp.URL+"/.well-known/jwks.json", "VG_EDGE_JWT_ALGS=RS256",
		"VG_EDGE_JWT_AUDIENCE="+iss.Audience, "VG_EDGE_JWT_ISSUER="+iss.Issuer,
		"VG_EDGE_JWT_JWKS_REFRESH=1s", "VG_EDGE_JWT_JWKS_WAIT=5s", // a refresh under the wait
	)
	reserve := func(order, tok string) (int, string, time.Duration) {
		t.Helper()
		req, _ := http.NewRequest("POST", e.URL()+"/vouchers/IDP/reservations",
			strings.NewReader(fmt.Sprintf(`{"customerId":"1001","orderId":%q,"orderAmount":100000}`, order)))
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
