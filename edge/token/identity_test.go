package token_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"vouchergate/edge/token"
	"vouchergate/testkit"
)

// A shopper's quota identities come from the claims the operator mapped: a string, an integer
// or an array of them; a value that could not be a quota identity is left out, and the token
// still verifies.
func TestShopperIdentitiesFromMappedClaims(t *testing.T) {
	iss := testkit.NewTokenIssuer(t)
	iss.Now = func() time.Time { return now }
	v, err := token.New(token.Options{JWKS: iss.JWKS(false), Algs: []string{"RS256"}, Audience: iss.Audience,
		Issuer: iss.Issuer, Now: func() time.Time { return now },
		IdentityClaims: map[string]string{"DEVICE": "device_id", "PHONE": "phone_number", "CARD": "card"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		claims map[string]any
		want   map[string][]string
	}{
		{"none", nil, nil},
		{"one string each", map[string]any{"device_id": "d-1", "phone_number": "+33612345678"},
			map[string][]string{"DEVICE": {"d-1"}, "PHONE": {"+33612345678"}}},
		{"an array", map[string]any{"device_id": []any{"d-1", "d-2"}}, map[string][]string{"DEVICE": {"d-1", "d-2"}}},
		{"an integer, as its digits", map[string]any{"card": 4242424242}, map[string][]string{"CARD": {"4242424242"}}},
		{"unusable values left out", map[string]any{"device_id": []any{"", "d-{1}", "ok", 1.5, true, map[string]any{}, strings.Repeat("x", 65), "a\u0001b"},
			"phone_number": false}, map[string][]string{"DEVICE": {"ok"}}},
		{"an unmapped claim is nothing", map[string]any{"user_device": "d-1"}, nil},
	} {
		c := iss.Claims("42")
		for k, val := range tt.claims {
			c[k] = val
		}
		sh, err := v.Shopper(iss.Sign(t, "RS256", c))
		if err != nil || sh.Subject != "42" || !reflect.DeepEqual(sh.Identities, tt.want) {
			t.Errorf("%s: %+v, %v; want subject 42 with %v", tt.name, sh, err, tt.want)
		}
	}
}
