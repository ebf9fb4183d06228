package config

import "fmt"

// The values of VG_EDGE_ANONYMOUS.
const (
	// AnonymousRefuse (the default) stops an edge that has a service key but verifies no
	// shoppers' tokens.
	AnonymousRefuse = "refuse"
	// AnonymousAllow runs it anyway: the operator accepts that anyone who reaches the edge acts
	// with the edge's key, as a demo or an edge behind the shop's own authentication may.
	AnonymousAllow = "allow"
)

// AnonymousWithKey reports whether the edge forwards requests nobody verified with its own
// service key: a key, and no shoppers' tokens. With the key's scopes (reserve, quota, read,
// edge) anyone could then confirm or release anyone's reservation and deduct from, roll back or
// read anyone's quota.
func (c Edge) AnonymousWithKey() bool { return c.APIKey != "" && !c.JWTOn() }

// checkAnonymous refuses a service key without shoppers' tokens unless VG_EDGE_ANONYMOUS says
// the operator means it.
func (c Edge) checkAnonymous() error {
	switch c.Anonymous {
	case "", AnonymousRefuse, AnonymousAllow: // "": a settings struct filled by hand, the default
	default:
		return fmt.Errorf("VG_EDGE_ANONYMOUS is %q; expected %s (the default) or %s", c.Anonymous, AnonymousRefuse, AnonymousAllow)
	}
	if c.AnonymousWithKey() && c.Anonymous != AnonymousAllow {
		return fmt.Errorf("VG_EDGE_API_KEY is set but shoppers' tokens are not verified (VG_EDGE_JWT_JWKS_FILE and VG_EDGE_JWT_JWKS_URL are empty): " +
			"every anonymous request would reach the backends with the edge's key, so anyone could release anyone's reservation; " +
			"set VG_EDGE_JWT_JWKS_FILE or VG_EDGE_JWT_JWKS_URL (with VG_EDGE_JWT_AUDIENCE and VG_EDGE_JWT_ISSUER) to verify shoppers, " +
			"unset VG_EDGE_API_KEY, or set VG_EDGE_ANONYMOUS=allow to run it so knowingly")
	}
	return nil
}
