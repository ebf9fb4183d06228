package config

import (
	"fmt"
	"strings"
)

// IdentityClaims reads VG_EDGE_JWT_IDENTITY_CLAIMS: which token claim holds a shopper's quota
// identities of each type other than USER (the subject), e.g. "DEVICE:device_id,PHONE:phone_number"
// gives {DEVICE: device_id, PHONE: phone_number}. Empty: none, a shopper owns its USER identity
// alone. A type is a quota identity type (^[A-Z0-9_]{1,32}$, not USER), named once.
func (c Edge) IdentityClaims() (map[string]string, error) {
	if strings.TrimSpace(c.JWTIdentityClaims) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, pair := range strings.Split(c.JWTIdentityClaims, ",") {
		typ, claim, ok := strings.Cut(strings.TrimSpace(pair), ":")
		switch {
		case !ok || !identityType(typ) || claim == "" || strings.ContainsAny(claim, " \t"):
			return nil, fmt.Errorf("VG_EDGE_JWT_IDENTITY_CLAIMS has %q; expected TYPE:claim pairs, comma-separated, such as DEVICE:device_id,PHONE:phone_number (TYPE in A-Z, 0-9 and _)", pair)
		case typ == "USER":
			return nil, fmt.Errorf("VG_EDGE_JWT_IDENTITY_CLAIMS maps USER; a shopper's USER identity is the token's sub, name other types only")
		case out[typ] != "":
			return nil, fmt.Errorf("VG_EDGE_JWT_IDENTITY_CLAIMS names %s twice; expected each type once", typ)
		}
		out[typ] = claim
	}
	return out, nil
}

// identityType reports whether s is a quota identity type: 1 to 32 of A-Z, 0-9 and _.
func identityType(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
