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
	req, ok := DecodeRequest(body)
	if !ok || wire.CheckID("orderId", req.OrderID, wire.MaxOrderIDLen) != nil {
		return "", false
	}
	return req.OrderID, true
}

// DecodeRequest decodes body as Decode does and returns the whole request, customerId
// included (42 and "42" alike), or false when the backend would refuse the body as malformed.
// Its ids are not checked. The edge reads the customer with it when shoppers' tokens are on.
func DecodeRequest(body []byte) (wire.ReserveRequest, bool) {
	var req wire.ReserveRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return req, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return req, false
	}
	for _, c := range body[dec.InputOffset():] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return req, false
		}
	}
	return req, true
}
