package app

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"

	"vouchergate/edge/token"
	"vouchergate/shared/config"
)

// loadTokens reads the JWKS file, fetches the identity provider's key set (waiting at most
// VG_EDGE_JWT_JWKS_WAIT), and returns the verifier of shoppers' tokens, or nil when tokens are
// off. Its errors name the variable to fix.
func loadTokens(cfg config.Edge, log *slog.Logger) (*token.Verifier, error) {
	if !cfg.JWTOn() {
		return nil, nil
	}
	var jwks []byte
	if cfg.JWTJWKSFile != "" {
		var err error
		if jwks, err = os.ReadFile(cfg.JWTJWKSFile); err != nil {
			return nil, fmt.Errorf("VG_EDGE_JWT_JWKS_FILE=%s: %w", cfg.JWTJWKSFile, err)
		}
	}
	claims, err := cfg.IdentityClaims()
	if err != nil {
		return nil, err
	}
	v, err := token.New(token.Options{
		JWKS: jwks, Algs: cfg.JWTAlgs, Audience: cfg.JWTAudience, Issuer: cfg.JWTIssuer, Leeway: cfg.JWTLeeway,
		IdentityClaims: claims,
		JWKSURL:        cfg.JWTJWKSURL, Refresh: cfg.JWTJWKSRefresh, Wait: cfg.JWTJWKSWait, Log: log,
	})
	if err != nil {
		return nil, fmt.Errorf("VG_EDGE_JWT_JWKS_FILE=%s, VG_EDGE_JWT_JWKS_URL=%s with VG_EDGE_JWT_ALGS=%v: %w",
			cfg.JWTJWKSFile, cfg.JWTJWKSURL, cfg.JWTAlgs, err)
	}
	if !v.Usable(cfg.JWTAlgs) {
		log.Warn("no key to verify shoppers' tokens yet: every token is refused until the identity provider answers",
			"VG_EDGE_JWT_JWKS_URL", cfg.JWTJWKSURL, "waited", cfg.JWTJWKSWait)
	}
	return v, nil
}

// loadTLS returns the public listener's TLS settings, or nil when TLS is off: HTTP/1.1 only
// (ALPN), TLS 1.2 at least.
func loadTLS(cfg config.Edge) (*tls.Config, error) {
	if !cfg.TLSOn() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("VG_EDGE_TLS_CERT_FILE=%s, VG_EDGE_TLS_KEY_FILE=%s: expected a PEM certificate chain and its PEM private key: %w",
			cfg.TLSCertFile, cfg.TLSKeyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, nil
}

// logPublicAccess says once, at start, what anyone who reaches the public port may do, loudly
// when that is acting with the edge's service key.
func (a *App) logPublicAccess() {
	cfg := a.Config
	switch {
	case cfg.JWTOn():
		a.log.Info("public access: reservation, confirm, release and the quota paths need a verified shopper's token and act for its subject only; "+
			"a sold-out voucher's 409 from memory, /healthz and /readyz need none", "serviceKey", cfg.APIKey != "")
	case cfg.AnonymousWithKey():
		a.log.Warn("public access: ANYONE who reaches the edge acts with its service key (VG_EDGE_API_KEY without shoppers' tokens, VG_EDGE_ANONYMOUS=allow): "+
			"they may reserve, confirm and release any order, and deduct from, roll back and read any quota, within the key's scopes",
			"anonymous", cfg.Anonymous)
	default:
		a.log.Warn("public access: no shoppers' tokens and no service key: requests reach the backends as clients sent them, " +
			"and the backends decide (one with VG_API_KEYS_FILE refuses them without a key of the caller's own)")
	}
}
