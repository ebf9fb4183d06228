package token_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"vouchergate/edge/token"
	"vouchergate/testkit"
)

// provider is an identity provider's JWKS endpoint over HTTPS on 127.0.0.1, whose keys the
// test rotates.
type provider struct {
	srv     *httptest.Server
	keys    map[string]*rsa.PrivateKey
	serving atomic.Pointer[[]byte] // the JWK Set it answers; nil: 503
	fetches atomic.Int64
}

func startProvider(t *testing.T, kids ...string) *provider {
	t.Helper()
	p := &provider{keys: map[string]*rsa.PrivateKey{}}
	for _, kid := range kids {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		p.keys[kid] = k
	}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.fetches.Add(1)
		set := p.serving.Load()
		if set == nil {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*set)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// serve makes the provider publish the public keys of kids (none: an empty set).
func (p *provider) serve(kids ...string) {
	b64 := base64.RawURLEncoding.EncodeToString
	keys := []map[string]string{}
	for _, kid := range kids {
		pub := p.keys[kid].PublicKey
		keys = append(keys, map[string]string{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
			"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes())})
	}
	b, _ := json.Marshal(map[string]any{"keys": keys})
	p.serving.Store(&b)
}

func (p *provider) down() { p.serving.Store(nil) }

func (p *provider) sign(t *testing.T, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"sub": "42", "iss": "https://id.test", "aud": "vouchergate", "exp": time.Now().Add(5 * time.Minute).Unix(),
	})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(p.keys[kid])
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (p *provider) verifier(t *testing.T, refresh time.Duration) *token.Verifier {
	t.Helper()
	v, err := token.New(token.Options{
		JWKSURL: p.srv.URL + "/.well-known/jwks.json", Client: p.srv.Client(), Refresh: refresh, Wait: 2 * time.Second,
		Algs: []string{"RS256"}, Audience: "vouchergate", Issuer: "https://id.test", Leeway: 30 * time.Second,
		Log: testkit.QuietLog,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

func verifies(v *token.Verifier, tok string) bool {
	sub, err := v.Verify(tok)
	return err == nil && sub == "42"
}

func TestKeysFromAJWKSURLFollowTheProvidersRotation(t *testing.T) {
	const refresh = 500 * time.Millisecond
	p := startProvider(t, "old", "new")
	p.serve("old")
	v := p.verifier(t, refresh)
	oldTok, newTok := p.sign(t, "old"), p.sign(t, "new")
	if !verifies(v, oldTok) {
		t.Fatal("a token of the provider's key does not verify")
	}
	if verifies(v, newTok) {
		t.Fatal("a token of a key the provider does not publish verifies")
	}

	// Rotation, step 1: the provider publishes the new key beside the old.
	p.serve("old", "new")
	rotated := time.Now()
	testkit.EventuallyWithin(t, refresh+time.Second, "the new key's tokens verify", func() bool { return verifies(v, newTok) })
	t.Logf("new key verifying %v after it was published", time.Since(rotated).Round(time.Millisecond))

	// Step 2: the old key is removed; its tokens stop within the refresh interval.
	p.serve("new")
	removed := time.Now()
	testkit.EventuallyWithin(t, refresh+time.Second, "the removed key's tokens refused", func() bool { return !verifies(v, oldTok) })
	t.Logf("old key refused %v after it was removed", time.Since(removed).Round(time.Millisecond))

	// The provider goes down, or answers a set with no usable key: the last good set stays.
	for _, what := range []struct {
		name string
		set  func()
	}{{"down", p.down}, {"an empty set", func() { p.serve() }}} {
		what.set()
		fetches := p.fetches.Load()
		testkit.Eventually(t, "two refreshes while the provider answers "+what.name, func() bool { return p.fetches.Load() >= fetches+2 })
		if !verifies(v, newTok) {
			t.Fatalf("with the provider answering %s, the last good key no longer verifies", what.name)
		}
	}
}

func TestAnUnknownKIDFetchesTheSetAtMostOncePerInterval(t *testing.T) {
	p := startProvider(t, "old", "new")
	p.serve("old")
	v := p.verifier(t, time.Hour) // no periodic refresh in this test
	p.serve("old", "new")
	if !verifies(v, p.sign(t, "new")) {
		t.Fatal("a token naming a kid the set lacked did not fetch the set again")
	}
	fetches := p.fetches.Load()
	start := time.Now()
	for i := range 50 { // made-up kids: never wait, fetch no more
		tok := p.sign(t, "new")
		tok = strings.Replace(tok, tok[:strings.Index(tok, ".")], base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"made-up-`+string(rune('a'+i%26))+`"}`)), 1)
		if verifies(v, tok) {
			t.Fatal("a made-up kid verified")
		}
	}
	if n := p.fetches.Load() - fetches; n != 0 {
		t.Fatalf("50 unknown kids fetched the set %d more times within the limit; want 0", n)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("50 unknown kids took %v: they waited for the rate limit", took)
	}
}

// With a refresh under the wait (here 1 s against 2 s), the limit on fetches for unknown kids is
// shorter than the wait too: a made-up kid found while no fetch is allowed is refused at once,
// not held until the limit lets one through. (Before: each such token held its handler up to
// the limit, 1 s here, 5 s with the edge's defaults.)
func TestAnUnknownKIDNeverWaitsForTheLimitUnderAShortRefresh(t *testing.T) {
	p := startProvider(t, "old", "new")
	p.serve("old")
	v := p.verifier(t, time.Second)
	p.serve("old", "new")
	if !verifies(v, p.sign(t, "new")) { // takes the limit's one fetch
		t.Fatal("a token naming a kid the set lacked did not fetch the set again")
	}
	for i := range 10 {
		tok := p.sign(t, "new")
		tok = strings.Replace(tok, tok[:strings.Index(tok, ".")], base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"made-up-`+string(rune('a'+i))+`"}`)), 1)
		start := time.Now()
		if verifies(v, tok) {
			t.Fatal("a made-up kid verified")
		}
		if took := time.Since(start); took > 200*time.Millisecond {
			t.Fatalf("made-up kid %d refused after %v; want at once", i, took)
		}
	}
}

func TestAProviderDownAtStartIsWaitedForBoundedly(t *testing.T) {
	p := startProvider(t, "k")
	p.down()
	start := time.Now()
	v := p.verifier(t, 300*time.Millisecond)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("New took %v with the provider down; want at most its wait", took)
	}
	if v.Usable([]string{"RS256"}) || verifies(v, p.sign(t, "k")) {
		t.Fatal("keys usable before the provider ever answered")
	}
	p.serve("k")
	testkit.EventuallyWithin(t, 2*time.Second, "the provider's keys once it answers", func() bool { return verifies(v, p.sign(t, "k")) })
}

func TestAJWKSURLMustBeHTTPS(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:1/jwks", "ftp://x/y", "https://", "not a url"} {
		_, err := token.New(token.Options{JWKSURL: u, Algs: []string{"RS256"}, Refresh: time.Minute, Wait: time.Second})
		if err == nil || !strings.Contains(err.Error(), "https") {
			t.Errorf("New with JWKS URL %q: %v; want an error asking for https", u, err)
		}
	}
	// A redirect to plain HTTP is not followed.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the plain HTTP server was asked") }))
	defer plain.Close()
	redir := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/jwks", http.StatusFound)
	}))
	defer redir.Close()
	v, err := token.New(token.Options{JWKSURL: redir.URL, Client: redir.Client(), Algs: []string{"RS256"},
		Refresh: time.Minute, Wait: time.Second, Log: testkit.QuietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.Usable([]string{"RS256"}) {
		t.Fatal("keys came through a redirect to plain HTTP")
	}
}
