package backendtest

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/backendtest/history"
	"vouchergate/shared/wire"
)

// Record makes b record every reservation, confirm, release and refund sent through Do (and
// Reserve) in rec, for a test that checks its history (history.For). Calls sent otherwise are
// not recorded. Not safe to call while requests are in flight.
func (b *Backend) Record(rec *history.Recorder) { b.rec = rec }

// recordBegin starts recording req if it is a voucher operation and b records; nil otherwise.
func (b *Backend) recordBegin(req *fasthttp.Request) *history.Call {
	if b.rec == nil {
		return nil
	}
	op, ok := voucherOp(req)
	if !ok {
		return nil
	}
	return b.rec.Begin(op)
}

// recordEnd ends call with what came back: err when no answer did.
func recordEnd(call *history.Call, status int, body []byte, err error) {
	if call == nil {
		return
	}
	if err != nil {
		call.Info("no answer: " + err.Error())
		return
	}
	call.Op.Status = status
	var e wire.Error
	switch {
	case status >= 200 && status < 300:
		var r wire.ReserveResponse
		if call.Op.Kind == history.Reserve && json.Unmarshal(body, &r) == nil {
			call.Op.Discount = r.DiscountAmount
		}
		call.Ok()
	case status >= 400 && status < 500: // a refusal: nothing was done
		_ = json.Unmarshal(body, &e)
		call.Fail(e.Error)
	default: // 502, 503: it may have been acted on
		_ = json.Unmarshal(body, &e)
		call.Info(e.Error)
	}
}

// voucherOp reads what req asks of a voucher, as a service asks it (no shopper: an orderId is
// one order whoever names it).
func voucherOp(req *fasthttp.Request) (history.Op, bool) {
	u, err := url.Parse(string(req.RequestURI()))
	if err != nil {
		return history.Op{}, false
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) < 3 || parts[0] != "vouchers" || parts[2] != "reservations" {
		return history.Op{}, false
	}
	op := history.Op{Voucher: wire.CanonicalCode(parts[1])}
	method := string(req.Header.Method())
	switch {
	case method == fasthttp.MethodPost && len(parts) == 3:
		var body struct {
			CustomerID  wire.CustomerID `json:"customerId"`
			OrderID     string          `json:"orderId"`
			OrderAmount int64           `json:"orderAmount"`
		}
		if json.Unmarshal(req.Body(), &body) != nil {
			return history.Op{}, false
		}
		op.Kind, op.Customer, op.Order, op.Amount = history.Reserve, string(body.CustomerID), body.OrderID, body.OrderAmount
	case method == fasthttp.MethodPost && len(parts) == 5 && parts[4] == "confirm":
		op.Kind, op.Order = history.Confirm, parts[3]
	case method == fasthttp.MethodPost && len(parts) == 5 && parts[4] == "refund":
		op.Kind, op.Order = history.Refund, parts[3]
	case method == fasthttp.MethodDelete && len(parts) == 4:
		op.Kind, op.Order = history.Release, parts[3]
	default:
		return history.Op{}, false
	}
	return op, true
}
