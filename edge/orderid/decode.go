package orderid

import (
	"bytes"
	"encoding/json"

	"vouchergate/shared/wire"
)

// Decode is the slow path for the bodies Extract is not certain of: it decodes body fully, as
// the backend's decoder does (encoding/json into wire.ReserveRequest, one object followed only
// by JSON white space, unknown fields ignored), so the key matched without regard to case
// ("OrderId"), the last of repeated keys, escapes and non-UTF-8 bytes read as encoding/json reads
// them. It returns the orderId and true, or false when the backend would refuse the body as
// malformed or its orderId as invalid: such a body is the backend's to answer (400).
//
// Like Extract, it does not look at customerId's and orderAmount's values beyond their JSON
// types. It allocates; the edge calls it only for the odd bodies Extract gives up on.
func Decode(body []byte) (string, bool) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "", false
	}
	var req wire.ReserveRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return "", false
	}
	for _, c := range body[dec.InputOffset():] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return "", false
		}
	}
	if wire.CheckID("orderId", req.OrderID, wire.MaxOrderIDLen) != nil {
		return "", false
	}
	return req.OrderID, true
}
