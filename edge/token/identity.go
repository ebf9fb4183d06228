package token

import (
	"strconv"

	"github.com/golang-jwt/jwt/v5"

	"vouchergate/shared/wire"
)

// maxIdentitiesPerClaim bounds the values read from one claim (a shopper's devices).
const maxIdentitiesPerClaim = 16

// identities reads the shopper's quota identities from the mapped claims. A claim holds one
// value or an array of them, each text (a JSON string) or an integer (a JSON number such as a
// numeric device id, as its digits). A value that is not one of these, or could not be a quota
// identity (empty, over 64 bytes, not text, a brace), is left out: the shopper cannot act with
// it, and nothing else in the token changes.
func (v *Verifier) identities(claims jwt.MapClaims) map[string][]string {
	var out map[string][]string
	for typ, name := range v.claims {
		var vals []string
		switch c := claims[name].(type) {
		case []any:
			for _, e := range c {
				if s, ok := identityValue(e); ok && len(vals) < maxIdentitiesPerClaim {
					vals = append(vals, s)
				}
			}
		default:
			if s, ok := identityValue(c); ok {
				vals = append(vals, s)
			}
		}
		if len(vals) > 0 {
			if out == nil {
				out = map[string][]string{}
			}
			out[typ] = vals
		}
	}
	return out
}

// identityValue is one claim value as a quota identity.
func identityValue(v any) (string, bool) {
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case float64: // encoding/json's number; an integer only, written as its digits
		if v != float64(int64(v)) || v < -1<<53 || v > 1<<53 {
			return "", false
		}
		s = strconv.FormatInt(int64(v), 10)
	default:
		return "", false
	}
	if s == "" || len(s) > wire.MaxIdentityLen || wire.CheckText("identity", s) != nil {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '{' || s[i] == '}' {
			return "", false
		}
	}
	return s, true
}
