package token_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"vouchergate/edge/token"
	"vouchergate/testkit"
)

var now = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

func verifier(t *testing.T, iss *testkit.TokenIssuer, jwks []byte, algs ...string) *token.Verifier {
	t.Helper()
	if len(algs) == 0 {
		algs = []string{"RS256", "ES256", "EdDSA", "HS256"}
	}
	v, err := token.New(token.Options{
		JWKS: jwks, Algs: algs, Audience: iss.Audience, Issuer: iss.Issuer, Leeway: 30 * time.Second,
		Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// unsigned returns a token with alg "none" and no signature.
func unsigned(claims jwt.MapClaims) string {
	s, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
	return s
}

// forgedHS256 signs claims as HS256 with secret, naming kid.
func forgedHS256(t testing.TB, kid string, secret []byte, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerify(t *testing.T) {
	iss := testkit.NewTokenIssuer(t)
	iss.Now = func() time.Time { return now }
	other := testkit.NewTokenIssuer(t) // keys the edge does not know
	other.Now = iss.Now
	with := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := iss.Claims("42")
		change(c)
		return c
	}
	for _, jwks := range []struct {
		name string
		raw  []byte
	}{{"keys name their alg", iss.JWKS(true)}, {"keys name no alg", iss.JWKS(false)}} {
		v := verifier(t, iss, jwks.raw)
		for _, tt := range []struct {
			name  string
			token string
			want  error
		}{
			{"RS256", iss.Sign(t, "RS256", iss.Claims("42")), nil},
			{"ES256", iss.Sign(t, "ES256", iss.Claims("42")), nil},
			{"EdDSA", iss.Sign(t, "EdDSA", iss.Claims("42")), nil},
			{"HS256", iss.Sign(t, "HS256", iss.Claims("42")), nil},
			{"audience among several", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { c["aud"] = []string{"other", iss.Audience} })), nil},
			{"expired within the leeway", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { c["exp"] = now.Add(-20 * time.Second).Unix() })), nil},
			{"nbf within the leeway", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { c["nbf"] = now.Add(20 * time.Second).Unix() })), nil},

			{"forged: another issuer's key", other.Sign(t, "RS256", iss.Claims("42")), token.ErrSignature},
			{"forged: claims changed after signing", tamper(iss.Sign(t, "ES256", iss.Claims("42")), iss.Claims("43")), token.ErrSignature},
			{"expired", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { c["exp"] = now.Add(-31 * time.Second).Unix() })), token.ErrExpired},
			{"not yet valid", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() })), token.ErrNotYetValid},
			{"no exp", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { delete(c, "exp") })), token.ErrClaimMissing},
			{"wrong audience", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { c["aud"] = "another-app" })), token.ErrAudience},
			{"no audience", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { delete(c, "aud") })), token.ErrClaimMissing},
			{"wrong issuer", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { c["iss"] = "https://evil.test" })), token.ErrIssuer},
			{"no issuer", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { delete(c, "iss") })), token.ErrClaimMissing},
			{"empty issuer", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { c["iss"] = "" })), token.ErrClaimMissing},
			{"no subject", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { delete(c, "sub") })), token.ErrSubject},
			{"subject too long", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { c["sub"] = strings.Repeat("x", 65) })), token.ErrSubject},
			{"subject with a control character", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { c["sub"] = "42\r\nX-VG-Subject: 43" })), token.ErrSubject},
			{"subject a number", iss.Sign(t, "RS256", with(func(c jwt.MapClaims) { c["sub"] = 42 })), token.ErrMalformed},
			{"alg none", unsigned(iss.Claims("42")), token.ErrSignature},
			{"alg none with a kid", unsignedWithKID(iss.Claims("42")), token.ErrSignature},
			{"HS256 with the RSA public key as secret", forgedHS256(t, "rsa", iss.RSAPublicDER(t), iss.Claims("42")), token.ErrSignature},
			{"HS256 with the RSA modulus as secret", forgedHS256(t, "rsa", iss.RSA.N.Bytes(), iss.Claims("42")), token.ErrSignature},
			{"HS256 with the RSA key, no kid", noKID(forgedHS256(t, "rsa", iss.RSAPublicDER(t), iss.Claims("42"))), token.ErrSignature},
			{"ES256 token naming the RSA key", renameKID(t, iss.Sign(t, "ES256", iss.Claims("42")), "rsa"), token.ErrSignature},
			{"not a JWT", "not.a.jwt", token.ErrMalformed},
			{"empty", "", token.ErrMalformed},
		} {
			t.Run(jwks.name+"/"+tt.name, func(t *testing.T) {
				sub, err := v.Verify(tt.token)
				if !errors.Is(err, tt.want) || (err == nil && sub != "42") {
					t.Fatalf("Verify: %q, %v; want 42, %v", sub, err, tt.want)
				}
			})
		}
	}
}

// An algorithm outside VG_EDGE_JWT_ALGS is refused even with a key for it.
func TestOnlyConfiguredAlgorithms(t *testing.T) {
	iss := testkit.NewTokenIssuer(t)
	iss.Now = func() time.Time { return now }
	v := verifier(t, iss, iss.JWKS(false), "RS256")
	if _, err := v.Verify(iss.Sign(t, "RS256", iss.Claims("42"))); err != nil {
		t.Fatalf("RS256: %v", err)
	}
	for _, alg := range []string{"ES256", "EdDSA", "HS256"} {
		if _, err := v.Verify(iss.Sign(t, alg, iss.Claims("42"))); !errors.Is(err, token.ErrSignature) {
			t.Errorf("%s with only RS256 accepted: %v; want ErrSignature", alg, err)
		}
	}
}

func TestNewRefusesUnusableSettings(t *testing.T) {
	iss := testkit.NewTokenIssuer(t)
	for _, tt := range []struct {
		name string
		jwks string
		algs []string
		want string
	}{
		{"no algorithm", string(iss.JWKS(true)), nil, "no algorithm"},
		{"unknown algorithm", string(iss.JWKS(true)), []string{"none"}, "is not one of"},
		{"not JSON", "{", []string{"RS256"}, "not a JWK Set"},
		{"no key for the algorithms", `{"keys":[]}`, []string{"RS256"}, "none of its 0 keys"},
		{"short HMAC key", `{"keys":[{"kty":"oct","kid":"h","k":"c2hvcnQ"}]}`, []string{"HS256"}, "at least 32"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := token.New(token.Options{JWKS: []byte(tt.jwks), Algs: tt.algs, Audience: "a", Issuer: "i"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v; want an error with %q", err, tt.want)
			}
		})
	}
}

// tamper replaces a token's claims, keeping its header and signature.
func tamper(tok string, claims jwt.MapClaims) string {
	parts := strings.Split(tok, ".")
	other, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SigningString()
	parts[1] = strings.Split(other, ".")[1]
	return strings.Join(parts, ".")
}

func unsignedWithKID(claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodNone, claims)
	tok.Header["kid"] = "rsa"
	s, _ := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
	return s
}

// noKID drops the kid from a token's header (the signature then no longer covers it: the
// verifier must refuse it all the same).
func noKID(tok string) string {
	parts := strings.Split(tok, ".")
	parts[0] = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	return strings.Join(parts, ".")
}

// renameKID points a token's header at another key.
func renameKID(t *testing.T, tok, kid string) string {
	parts := strings.Split(tok, ".")
	head, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	parts[0] = base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(head), `"kid":"ec"`, `"kid":"`+kid+`"`, 1)))
	return strings.Join(parts, ".")
}

// FuzzVerify feeds the verifier tokens derived from good ones. The oracle: only the issuer's
// keys sign, and they signed only subject "42", so whatever verifies names "42"; nothing
// panics. A mutation that keeps a token valid (padding bits of base64, say) may pass; a
// changed subject never.
func FuzzVerify(f *testing.F) {
	iss := testkit.NewTokenIssuer(f)
	iss.Now = func() time.Time { return now }
	v, err := token.New(token.Options{JWKS: iss.JWKS(false), Algs: []string{"RS256", "ES256", "EdDSA", "HS256"},
		Audience: iss.Audience, Issuer: iss.Issuer, Leeway: 30 * time.Second, Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	for _, alg := range []string{"RS256", "ES256", "EdDSA", "HS256"} {
		good := iss.Sign(f, alg, iss.Claims("42"))
		f.Add(good)
		f.Add(tamper(good, iss.Claims("43")))
	}
	f.Add(unsigned(iss.Claims("43")))
	f.Add(noKID(forgedHS256(f, "rsa", iss.RSAPublicDER(f), iss.Claims("43"))))
	f.Fuzz(func(t *testing.T, raw string) {
		sub, err := v.Verify(raw)
		if err == nil && sub != "42" {
			t.Fatalf("Verify(%q) = %q: a subject no key signed", raw, sub)
		}
	})
}
