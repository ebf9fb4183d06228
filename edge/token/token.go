// Package token verifies shoppers' JWTs at the edge: a signature by a key of a local JWKS
// file or of the identity provider's JWKS URL (remote.go), in one of the configured algorithms, by the expected issuer for the expected audience,
// inside its validity (exp required, nbf honoured, both with a leeway), naming a subject.
//
// golang-jwt/jwt parses and checks the claims; MicahParks/keyfunc finds the key by kid in the
// JWKS. On top of both, a key only verifies the algorithms of its own type (an RSA key RS* and
// PS*, an EC key the ES* of its curve, an Ed25519 key EdDSA, an oct key HS*) and, when the JWK
// names one, its own alg: an HS256 token "signed" with an RSA public key as HMAC secret, or one
// with alg "none", never verifies. A header with crit, a time claim that is not a number and a
// member named twice are refused before the signature is looked at (strict.go).
package token

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"vouchergate/shared/wire"
)

// Why a token is refused. Each is worded for the shopper's client, and is the message of the
// edge's 401.
var (
	// ErrMalformed: not three base64url parts holding JSON, or a claim of the wrong type.
	ErrMalformed = errors.New("the token is not a well-formed JWT")
	// ErrSignature: no configured key verifies the signature in the token's algorithm, or the
	// algorithm is not accepted (alg "none" included).
	ErrSignature = errors.New("the token's signature does not verify with an accepted key and algorithm")
	// ErrExpired: exp is past, by more than the leeway.
	ErrExpired = errors.New("the token has expired")
	// ErrNotYetValid: nbf is ahead, by more than the leeway.
	ErrNotYetValid = errors.New("the token is not valid yet")
	// ErrAudience: aud does not name this audience.
	ErrAudience = errors.New("the token is not for this audience")
	// ErrIssuer: iss is not the expected issuer.
	ErrIssuer = errors.New("the token is not from the expected issuer")
	// ErrClaimMissing: exp, aud or iss is absent.
	ErrClaimMissing = errors.New("the token lacks exp, aud or iss")
	// ErrSubject: sub is absent, or not 1 to 64 bytes of text.
	ErrSubject = errors.New("the token's sub must be 1 to 64 bytes of text")
)

// Options configure a Verifier. JWKS, JWKSURL or both must be given.
type Options struct {
	JWKS     []byte           // a JWK Set, as JSON; its keys come before the URL's
	Algs     []string         // the algorithms accepted, e.g. RS256, ES256, EdDSA, HS256
	Audience string           // required in aud
	Issuer   string           // required as iss
	Leeway   time.Duration    // allowed clock skew for exp and nbf
	Now      func() time.Time // nil: time.Now
	// IdentityClaims maps a quota identity type (DEVICE, PHONE...) to the claim that holds the
	// shopper's identities of that type; nil: the shopper has its subject (USER) alone.
	IdentityClaims map[string]string

	// The identity provider's JWK Set, fetched over HTTPS (remote.go).
	JWKSURL string        // https://…; "": none
	Refresh time.Duration // fetched again this often; 0: 5m
	Wait    time.Duration // the first fetch, at New, and each fetch, take at most this long; 0: 5s
	Client  *http.Client  // nil: Go's defaults (the system's roots)
	Log     *slog.Logger  // failed fetches; nil: slog.Default()
}

// Verifier checks tokens. It is safe for concurrent use. Close stops its fetches.
type Verifier struct {
	parser *jwt.Parser
	claims map[string]string // Options.IdentityClaims
	keys   keyfunc.Keyfunc
	stop   context.CancelFunc
}

// Close stops fetching the identity provider's keys. The keys held still verify.
func (v *Verifier) Close() { v.stop() }

// Algorithms the edge knows how to verify.
var known = map[string]bool{
	"RS256": true, "RS384": true, "RS512": true, "PS256": true, "PS384": true, "PS512": true,
	"ES256": true, "ES384": true, "ES512": true, "EdDSA": true, "HS256": true, "HS384": true, "HS512": true,
}

// New checks the options and returns a Verifier. Its errors say what is wrong with the JWKS or
// the algorithms, for the caller to put after the variable's name.
func New(o Options) (*Verifier, error) {
	if len(o.Algs) == 0 {
		return nil, errors.New("no algorithm accepted; expected a list such as RS256,ES256")
	}
	for _, a := range o.Algs {
		if !known[a] {
			return nil, fmt.Errorf("algorithm %q is not one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, HS256, HS384, HS512", a)
		}
	}
	var storage jwkset.Storage
	if len(o.JWKS) > 0 || o.JWKSURL == "" {
		var set jwkset.JWKSMarshal
		if err := json.Unmarshal(o.JWKS, &set); err != nil {
			return nil, fmt.Errorf("not a JWK Set: %w", err)
		}
		var err error
		if storage, err = set.ToStorage(); err != nil {
			return nil, fmt.Errorf("a key of the JWK Set cannot be read: %w", err)
		}
		if err := checkKeys(storage, o.Algs); err != nil {
			return nil, err
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	if o.JWKSURL != "" {
		var err error
		if storage, err = remoteStorage(ctx, o, storage); err != nil {
			stop()
			return nil, err
		}
	}
	keys, err := keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: storage, UseWhitelist: []jwkset.USE{jwkset.UseSig, ""}})
	if err != nil {
		stop()
		return nil, err
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(o.Algs), jwt.WithLeeway(o.Leeway), jwt.WithExpirationRequired(),
	}
	if o.Audience != "" {
		opts = append(opts, jwt.WithAudience(o.Audience))
	}
	if o.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(o.Issuer))
	}
	if o.Now != nil {
		opts = append(opts, jwt.WithTimeFunc(o.Now))
	}
	return &Verifier{parser: jwt.NewParser(opts...), claims: o.IdentityClaims, keys: keys, stop: stop}, nil
}

// Usable reports whether the verifier holds a key usable in one of the configured algorithms:
// false while an identity provider has not answered yet.
func (v *Verifier) Usable(algs []string) bool {
	all, err := v.keys.Storage().KeyReadAll(context.Background())
	return err == nil && checkSet(all, algs) == nil
}

// checkKeys refuses a JWK Set with no key usable in one of algs, and an HMAC key shorter than
// its hash (RFC 7518 §3.2), which could be guessed.
func checkKeys(s jwkset.Storage, algs []string) error {
	all, err := s.KeyReadAll(context.Background())
	if err != nil {
		return err
	}
	return checkSet(all, algs)
}

// checkSet is checkKeys on the keys themselves.
func checkSet(all []jwkset.JWK, algs []string) error {
	usable := 0
	for _, k := range all {
		m := k.Marshal()
		if secret, ok := k.Key().([]byte); ok && len(secret) < 32 {
			return fmt.Errorf("oct key %q has %d bytes; an HMAC key needs at least 32", m.KID, len(secret))
		}
		for _, a := range algs {
			if (m.ALG == "" || string(m.ALG) == a) && fits(a, publicOf(k.Key())) {
				usable++
				break
			}
		}
	}
	if usable == 0 {
		return fmt.Errorf("none of its %d keys verifies one of %s", len(all), strings.Join(algs, ","))
	}
	return nil
}

// Verify checks raw, a compact JWT, and returns its subject, or one of the errors above.
func (v *Verifier) Verify(raw string) (string, error) {
	sh, err := v.Shopper(raw)
	return sh.Subject, err
}

// Shopper checks raw as Verify does and returns the shopper it names: its subject and the quota
// identities of the claims in Options.IdentityClaims (identity.go).
func (v *Verifier) Shopper(raw string) (wire.Shopper, error) {
	if err := checkStrict(raw); err != nil {
		return wire.Shopper{}, err
	}
	var claims jwt.MapClaims
	if _, err := v.parser.ParseWithClaims(raw, &claims, v.key); err != nil {
		return wire.Shopper{}, refusal(err)
	}
	sub, isText := claims["sub"].(string)
	if _, present := claims["sub"]; present && !isText {
		return wire.Shopper{}, ErrMalformed // a claim of the wrong type, as the registered claims' decoder finds it
	}
	// A customerId or quota identity is at most 64 bytes of text; a longer sub could match none.
	if sub == "" || len(sub) > wire.MaxCustomerLen || wire.CheckText("sub", sub) != nil {
		return wire.Shopper{}, ErrSubject
	}
	return wire.Shopper{Subject: sub, Identities: v.identities(claims)}, nil
}

// key is the jwt.Keyfunc: keyfunc's key for the token's kid (or every key, with no kid), kept
// only when it may verify the token's algorithm.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	k, err := v.keys.Keyfunc(t)
	if err != nil {
		return nil, err
	}
	alg := t.Method.Alg()
	if set, ok := k.(jwt.VerificationKeySet); ok {
		var kept jwt.VerificationKeySet
		for _, key := range set.Keys {
			if fits(alg, key) {
				kept.Keys = append(kept.Keys, key)
			}
		}
		if len(kept.Keys) == 0 {
			return nil, fmt.Errorf("no key for %s", alg)
		}
		return kept, nil
	}
	if !fits(alg, k) {
		return nil, fmt.Errorf("the key named by kid is not for %s", alg)
	}
	return k, nil
}

// fits reports whether key, as keyfunc gives it, is of the type alg verifies with.
func fits(alg string, key any) bool {
	switch key := key.(type) {
	case []byte:
		return strings.HasPrefix(alg, "HS")
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		switch alg {
		case "ES256":
			return key.Curve == elliptic.P256()
		case "ES384":
			return key.Curve == elliptic.P384()
		case "ES512":
			return key.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// publicOf is the key keyfunc hands out for k: the public half of a private key.
func publicOf(k any) any {
	if p, ok := k.(interface{ Public() crypto.PublicKey }); ok {
		return p.Public()
	}
	return k
}

// refusal maps golang-jwt's error to the edge's reason. The order matters: a token can fail in
// several ways at once, and a bad signature says more than its claims.
func refusal(err error) error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return ErrMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return ErrSignature
	case errors.Is(err, jwt.ErrTokenExpired):
		return ErrExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return ErrNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return ErrAudience
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return ErrIssuer
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return ErrClaimMissing
	case errors.Is(err, jwt.ErrTokenInvalidClaims):
		return ErrMalformed
	}
	return ErrSignature
}
