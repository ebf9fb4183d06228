package testkit

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TokenIssuer signs shoppers' JWTs for tests with one key of each kind the edge verifies, and
// gives the JWK Set that holds their public halves (kids "rsa", "ec", "ed", "hmac").
type TokenIssuer struct {
	RSA      *rsa.PrivateKey
	EC       *ecdsa.PrivateKey
	Ed       ed25519.PrivateKey
	HMAC     []byte
	Issuer   string
	Audience string
	Now      func() time.Time // the time tokens are issued at; nil: time.Now
}

// NewTokenIssuer returns an issuer with fresh keys, issuer "https://id.test" and audience
// "vouchergate".
func NewTokenIssuer(t testing.TB) *TokenIssuer {
	t.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	return &TokenIssuer{RSA: rsaKey, EC: ecKey, Ed: edKey, HMAC: secret, Issuer: "https://id.test", Audience: "vouchergate"}
}

// KIDs of the issuer's keys, by algorithm.
var tokenKIDs = map[string]string{"RS256": "rsa", "ES256": "ec", "EdDSA": "ed", "HS256": "hmac"}

// JWKS returns the JWK Set of the issuer's keys; with algs, each key names its alg.
func (i *TokenIssuer) JWKS(algs bool) []byte {
	b64 := base64.RawURLEncoding.EncodeToString
	pad := func(b []byte, n int) []byte { return append(make([]byte, n-len(b)), b...) }
	keys := []map[string]string{
		{"kty": "RSA", "kid": "rsa", "alg": "RS256", "n": b64(i.RSA.N.Bytes()), "e": b64(big.NewInt(int64(i.RSA.E)).Bytes())},
		{"kty": "EC", "kid": "ec", "alg": "ES256", "crv": "P-256", "x": b64(pad(i.EC.X.Bytes(), 32)), "y": b64(pad(i.EC.Y.Bytes(), 32))}, //nolint:staticcheck
		{"kty": "OKP", "kid": "ed", "alg": "EdDSA", "crv": "Ed25519", "x": b64(i.Ed.Public().(ed25519.PublicKey))},
		{"kty": "oct", "kid": "hmac", "alg": "HS256", "k": b64(i.HMAC)},
	}
	for _, k := range keys {
		if !algs {
			delete(k, "alg")
		}
	}
	b, _ := json.Marshal(map[string]any{"keys": keys})
	return b
}

// Claims returns valid claims for sub: the issuer's iss and aud, issued now, expiring in 5 min.
func (i *TokenIssuer) Claims(sub string) jwt.MapClaims {
	now := time.Now()
	if i.Now != nil {
		now = i.Now()
	}
	return jwt.MapClaims{"sub": sub, "iss": i.Issuer, "aud": i.Audience, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}
}

// Sign signs claims with the issuer's key for alg (RS256, ES256, EdDSA or HS256), naming its kid.
func (i *TokenIssuer) Sign(t testing.TB, alg string, claims jwt.MapClaims) string {
	t.Helper()
	var key any
	switch alg {
	case "RS256":
		key = i.RSA
	case "ES256":
		key = i.EC
	case "EdDSA":
		key = i.Ed
	case "HS256":
		key = i.HMAC
	default:
		t.Fatalf("TokenIssuer cannot sign %s", alg)
	}
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(alg), claims)
	tok.Header["kid"] = tokenKIDs[alg]
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// RSAPublicDER is the issuer's RSA public key as PKIX DER: what a forger of an "HS256" token
// would use as the HMAC secret, hoping the verifier takes the RSA key as one.
func (i *TokenIssuer) RSAPublicDER(t testing.TB) []byte {
	der, err := x509.MarshalPKIXPublicKey(&i.RSA.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}
