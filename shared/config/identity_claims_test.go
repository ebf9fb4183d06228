package config

import (
	"maps"
	"strings"
	"testing"
)

func TestIdentityClaims(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  map[string]string
		err   string // "": none; else a part of the message
	}{
		{"", nil, ""},
		{"DEVICE:device_id", map[string]string{"DEVICE": "device_id"}, ""},
		{" DEVICE:device_id , PHONE:phone_number ", map[string]string{"DEVICE": "device_id", "PHONE": "phone_number"}, ""},
		{"CARD_2:https://example.com/card", map[string]string{"CARD_2": "https://example.com/card"}, ""},
		{"device:device_id", nil, "TYPE:claim pairs"},
		{"DEVICE", nil, "TYPE:claim pairs"},
		{"DEVICE:", nil, "TYPE:claim pairs"},
		{"DEVICE:a b", nil, "TYPE:claim pairs"},
		{"USER:uid", nil, "USER identity is the token's sub"},
		{"DEVICE:a,DEVICE:b", nil, "names DEVICE twice"},
	} {
		got, err := Edge{JWTIdentityClaims: tt.value}.IdentityClaims()
		switch {
		case tt.err == "" && (err != nil || !maps.Equal(got, tt.want)):
			t.Errorf("%q: %v, %v; want %v", tt.value, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "VG_EDGE_JWT_IDENTITY_CLAIMS")):
			t.Errorf("%q: %v; want an error naming VG_EDGE_JWT_IDENTITY_CLAIMS and %q", tt.value, err, tt.err)
		}
	}
}
