package token_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"vouchergate/edge/token"
	"vouchergate/testkit"
)

// signRaw signs header and claims exactly as written (JSON text), with the issuer's RSA key.
func signRaw(t testing.TB, iss *testkit.TokenIssuer, header, claims string) string {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	signing := b64([]byte(header)) + "." + b64([]byte(claims))
	sig, err := jwt.SigningMethodRS256.Sign(signing, iss.RSA)
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + b64(sig)
}

func TestVerifyRefusesWhatAStrictReaderWould(t *testing.T) {
	iss := testkit.NewTokenIssuer(t)
	iss.Now = func() time.Time { return now }
	v := verifier(t, iss, iss.JWKS(false))
	exp, iat := now.Add(5*time.Minute).Unix(), now.Unix()
	claims := func(extra string) string {
		return fmt.Sprintf(`{"iss":%q,"aud":%q,"iat":%d,"exp":%d%s}`, iss.Issuer, iss.Audience, iat, exp, extra)
	}
	const header = `{"alg":"RS256","kid":"rsa","typ":"JWT"}`
	for _, tt := range []struct {
		name           string
		header, claims string
		want           error
	}{
		{"well formed, signed as written", header, claims(`,"sub":"42"`), nil},
		{"crit in the header", `{"alg":"RS256","kid":"rsa","crit":["exp"]}`, claims(`,"sub":"42"`), token.ErrCritical},
		{"an empty crit", `{"alg":"RS256","kid":"rsa","crit":[]}`, claims(`,"sub":"42"`), token.ErrCritical},
		{"alg named twice", `{"alg":"none","kid":"rsa","alg":"RS256"}`, claims(`,"sub":"42"`), token.ErrMalformed},
		{"sub twice", header, claims(`,"sub":"42","sub":"43"`), token.ErrMalformed},
		{"sub twice, same value", header, claims(`,"sub":"42","sub":"42"`), token.ErrMalformed},
		{"exp as a string", header, fmt.Sprintf(`{"iss":%q,"aud":%q,"exp":"%d","sub":"42"}`, iss.Issuer, iss.Audience, exp), token.ErrMalformed},
		{"nbf as a string", header, claims(fmt.Sprintf(`,"nbf":"%d","sub":"42"`, iat)), token.ErrMalformed},
		{"nbf as a boolean", header, claims(`,"nbf":true,"sub":"42"`), token.ErrMalformed},
		{"iat as a string", header, fmt.Sprintf(`{"iss":%q,"aud":%q,"iat":"%d","exp":%d,"sub":"42"}`, iss.Issuer, iss.Audience, iat, exp), token.ErrMalformed},
		{"exp as null", header, fmt.Sprintf(`{"iss":%q,"aud":%q,"exp":null,"sub":"42"}`, iss.Issuer, iss.Audience), token.ErrMalformed},
		{"claims followed by more", header, claims(`,"sub":"42"`) + `{}`, token.ErrMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sub, err := v.Verify(signRaw(t, iss, tt.header, tt.claims))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %q, %v; want %v", sub, err, tt.want)
			}
		})
	}
}

// FuzzStrictMembers signs what the fuzzer writes as the claims: Verify may accept it only when
// encoding/json reads it as one object whose time claims are numbers and whose members, counted
// by a second reader, are each named once.
func FuzzStrictMembers(f *testing.F) {
	iss := testkit.NewTokenIssuer(f)
	iss.Now = func() time.Time { return now }
	// HS256, so that signing each input is cheap and the fuzzer reaches far.
	v, err := token.New(token.Options{JWKS: iss.JWKS(false), Algs: []string{"HS256"},
		Audience: iss.Audience, Issuer: iss.Issuer, Leeway: 30 * time.Second, Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	good := fmt.Sprintf(`{"iss":%q,"aud":%q,"exp":%d,"sub":"42"}`, iss.Issuer, iss.Audience, now.Add(time.Minute).Unix())
	f.Add(good)
	f.Add(strings.Replace(good, `"sub":"42"`, `"sub":"42","sub":"43"`, 1))
	f.Add(strings.Replace(good, `"exp":`, `"exp":"`, 1))
	f.Add(strings.Replace(good, `"sub":"42"`, `"s\u0075b":"43","sub":"42"`, 1))
	signing := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","kid":"hmac"}`)) + "."
	f.Fuzz(func(t *testing.T, claims string) {
		b64 := base64.RawURLEncoding.EncodeToString
		s := signing + b64([]byte(claims))
		sig, err := jwt.SigningMethodHS256.Sign(s, iss.HMAC)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(s + "." + b64(sig)); err != nil {
			return
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(claims), &m); err != nil {
			t.Fatalf("accepted claims encoding/json cannot read: %q: %v", claims, err)
		}
		for _, name := range []string{"exp", "nbf", "iat"} {
			if x, ok := m[name]; ok {
				if _, num := x.(float64); !num {
					t.Fatalf("accepted %s = %#v, not a number: %q", name, x, claims)
				}
			}
		}
		if n := countMembers(t, claims); n != len(m) {
			t.Fatalf("accepted claims with %d members under %d names: %q", n, len(m), claims)
		}
	})
}

// countMembers counts the top-level members of obj, each as it comes: encoding/json's map keeps
// one per name, so more members than map entries is a name given twice.
func countMembers(t *testing.T, obj string) int {
	var pairs orderedPairs
	if err := json.Unmarshal([]byte(obj), &pairs); err != nil {
		t.Fatalf("count members of %q: %v", obj, err)
	}
	return int(pairs)
}

// orderedPairs is the number of members of a JSON object.
type orderedPairs int

func (p *orderedPairs) UnmarshalJSON(b []byte) error {
	n := 0
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if _, err := dec.Token(); err != nil {
		return err
	}
	for dec.More() {
		if _, err := dec.Token(); err != nil {
			return err
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
		n++
	}
	*p = orderedPairs(n)
	return nil
}
