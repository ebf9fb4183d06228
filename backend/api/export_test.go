package api

import (
	"bytes"

	gojson "github.com/goccy/go-json"

	"vouchergate/backend/apikeys"
	"vouchergate/shared/wire"
)

// DeductReaders are the ways to read a deduct body that the benchmarks compare: the
// hand-written scanner, encoding/json and github.com/goccy/go-json (a fast drop-in library),
// all strict about unknown fields.
var DeductReaders = []struct {
	Name string
	Read func([]byte, *wire.QuotaDeductRequest) error
}{
	{"hand-written", readDeduct},
	{"encoding-json", func(b []byte, r *wire.QuotaDeductRequest) error { return decodeJSON(b, r, strict) }},
	{"goccy-go-json", func(b []byte, r *wire.QuotaDeductRequest) error {
		d := gojson.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		return d.Decode(r)
	}},
}

// UseDeductReader makes s read deduct bodies with read.
func UseDeductReader(s *Server, read func([]byte, *wire.QuotaDeductRequest) error) {
	s.readDeduct = read
}

// ScopesOf returns the scopes a service API key needs for the route e (none: no key).
func ScopesOf(e Endpoint) apikeys.Scope {
	for _, r := range endpoints {
		if r.Endpoint == e {
			return r.scopes
		}
	}
	panic("no route " + e.Method + " " + e.Path)
}
