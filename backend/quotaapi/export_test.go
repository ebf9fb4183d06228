package quotaapi

import (
	"bytes"
	"errors"

	gojson "github.com/goccy/go-json"

	"vouchergate/shared/wire"
)

// DeductDecoders are the ways to read a deduct body that the benchmarks compare: the
// hand-written scanner, encoding/json and github.com/goccy/go-json, each strict (unknown
// fields and trailing data refused).
var DeductDecoders = []struct {
	Name   string
	Decode func([]byte, *wire.QuotaDeductRequest) error
}{
	{"hand-written", decodeDeduct},
	{"encoding-json", func(b []byte, r *wire.QuotaDeductRequest) error { return decodeJSON(b, r) }},
	{"go-json", decodeGoJSON},
}

// UseDeductDecoder makes h read deduct bodies with decode.
func UseDeductDecoder(h *Handlers, decode func([]byte, *wire.QuotaDeductRequest) error) {
	h.decodeDeduct = decode
}

func decodeGoJSON(body []byte, req *wire.QuotaDeductRequest) error {
	dec := gojson.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return err
	}
	for _, c := range body[dec.InputOffset():] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return errors.New("data after the JSON object")
		}
	}
	return nil
}
