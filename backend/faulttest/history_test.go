package faulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"vouchergate/backend/backendtest/history"
	"vouchergate/shared/wire"
)

// Every reservation, confirm and release a test's clients send is recorded in the test's
// history (history.For), which is checked against the voucher model when the test ends: a
// history that is not linearizable fails the test, naming the smallest failing window and
// where the history is kept.

// recorded wraps a client's transport so that it records t's voucher operations.
func recorded(t testing.TB, next http.RoundTripper) http.RoundTripper {
	return recording{next: next, rec: history.For(t)}
}

// recordVoucher tells t's history a voucher's limits and the test's discount.
func recordVoucher(t testing.TB, code string, total, perUser int) {
	history.For(t).Voucher(code, history.Voucher{TotalLimit: total, PerUserLimit: perUser, Discount: discount})
}

// closeMidSale ends the voucher's period in the database now, as an operator would, and
// records it: no order sent after it may be granted.
func closeMidSale(t *testing.T, pool *pgxpool.Pool, code string) {
	t.Helper()
	c := history.For(t).Begin(history.Op{Kind: history.Close, Voucher: code})
	if _, err := pool.Exec(context.Background(), `UPDATE vouchers SET ends_at = now() WHERE code = $1`, code); err != nil {
		c.Info(err.Error())
		t.Fatal(err)
	}
	c.Ok()
}

type recording struct {
	next http.RoundTripper
	rec  *history.Recorder
}

func (r recording) RoundTrip(req *http.Request) (*http.Response, error) {
	op, ok := voucherOp(req)
	if !ok {
		return r.next.RoundTrip(req)
	}
	call := r.rec.Begin(op)
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		call.Info("no answer: " + err.Error())
		return nil, err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(raw), errReader{err}))
	if err != nil {
		call.Info("answer cut: " + err.Error())
		return resp, nil
	}
	var body wire.ReserveResponse
	var e wire.Error
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_ = json.Unmarshal(raw, &body)
	} else if json.Unmarshal(raw, &e) != nil || e.Error == "" {
		e.Error = http.StatusText(resp.StatusCode)
	}
	endCall(call, resp.StatusCode, e.Error, body.DiscountAmount)
	return resp, nil
}

// endCall ends a recorded call with its answer: a 2xx is ok (a reservation's with its
// discount), a 4xx a refusal (nothing was done), anything else unknown (502, 503: it may have
// been acted on).
func endCall(call *history.Call, status int, code string, discount int64) {
	call.Op.Status = status
	switch {
	case status >= 200 && status < 300:
		if call.Op.Kind == history.Reserve {
			call.Op.Discount = discount
		}
		call.Ok()
	case status >= 400 && status < 500:
		call.Fail(code)
	default:
		call.Info(code)
	}
}

// errReader returns err once the answer's bytes are read (io.EOF for none).
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

// voucherOp reads what a request asks of a voucher: a reservation, a confirm or a release.
func voucherOp(req *http.Request) (history.Op, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if len(parts) < 3 || parts[0] != "vouchers" || parts[2] != "reservations" {
		return history.Op{}, false
	}
	// The fault tests' clients are services (no shopper's token): an orderId is one order
	// whoever names it.
	op := history.Op{Voucher: parts[1]}
	switch {
	case req.Method == http.MethodPost && len(parts) == 3:
		var body struct {
			CustomerID  any    `json:"customerId"`
			OrderID     string `json:"orderId"`
			OrderAmount int64  `json:"orderAmount"`
		}
		if req.GetBody == nil {
			return history.Op{}, false
		}
		rd, err := req.GetBody()
		if err != nil || json.NewDecoder(rd).Decode(&body) != nil {
			return history.Op{}, false
		}
		op.Kind, op.Order, op.Amount = history.Reserve, body.OrderID, body.OrderAmount
		if s, ok := body.CustomerID.(string); ok {
			op.Customer = s
		} else if body.CustomerID != nil {
			raw, _ := json.Marshal(body.CustomerID) // a number: one customer with its string form
			op.Customer = string(raw)
		}
	case req.Method == http.MethodPost && len(parts) == 5 && parts[4] == "confirm":
		op.Kind, op.Order = history.Confirm, parts[3]
	case req.Method == http.MethodDelete && len(parts) == 4:
		op.Kind, op.Order = history.Release, parts[3]
	default:
		return history.Op{}, false
	}
	return op, true
}
