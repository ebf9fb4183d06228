package api

import "vouchergate/shared/wire"

// DeductReaders are the ways to read a deduct body that the benchmarks compare: the
// hand-written scanner and encoding/json, both strict.
var DeductReaders = []struct {
	Name string
	Read func([]byte, *wire.QuotaDeductRequest) error
}{
	{"hand-written", readDeduct},
	{"encoding-json", func(b []byte, r *wire.QuotaDeductRequest) error { return decodeJSON(b, r, strict) }},
}

// UseDeductReader makes s read deduct bodies with read.
func UseDeductReader(s *Server, read func([]byte, *wire.QuotaDeductRequest) error) {
	s.readDeduct = read
}
