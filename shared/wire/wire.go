// Package wire holds what clients, the edge and the backend say to each other over HTTP:
// request and response bodies, error codes, and the limits on identifiers.
package wire

import "bytes"

// ReserveRequest is the body of POST /vouchers/{code}/reservations.
type ReserveRequest struct {
	CustomerID  CustomerID `json:"customerId"` // a JSON integer or string; see CustomerID
	OrderID     string     `json:"orderId"`
	OrderAmount *int64     `json:"orderAmount"` // a pointer so that a missing amount is told apart from 0
}

// ReserveResponse is the body of a 201 to a reservation, and of every retry of it.
type ReserveResponse struct {
	OrderID        string `json:"orderId"`
	DiscountAmount int64  `json:"discountAmount"`
}

// ValidateResponse is the body of a 200 to POST /vouchers/{code}/validate (a dry run of a
// reservation, with the reservation's body): valid with the discount a reservation would get
// now, or not valid with the error code it would be refused with. It is advisory: a use may go
// between the dry run and the reservation.
type ValidateResponse struct {
	Valid          bool   `json:"valid"`
	DiscountAmount *int64 `json:"discountAmount,omitempty"` // when valid
	Error          string `json:"error,omitempty"`          // when not valid
	Reason         string `json:"reason,omitempty"`         // with NOT_ELIGIBLE: why (Reason*)
}

// ReservationStatus is the body of a 200 to confirm and release.
type ReservationStatus struct {
	OrderID string `json:"orderId"`
	Status  string `json:"status"`
}

// Error is the body of every 4xx and 5xx answer.
type Error struct {
	Error   string `json:"error"`
	Reason  string `json:"reason,omitempty"` // with NOT_ELIGIBLE: why (Reason*)
	Message string `json:"message,omitempty"`
}

// Why a reservation is NOT_ELIGIBLE, the values of Error.Reason and ValidateResponse.Reason.
const (
	ReasonNotStarted    = "NOT_STARTED"     // before the voucher's startsAt
	ReasonEnded         = "ENDED"           // at or after its endsAt
	ReasonOrderTooSmall = "ORDER_TOO_SMALL" // orderAmount below its minOrderAmount
	ReasonPaused        = "PAUSED"          // the voucher is paused (active false)
)

// Error codes, the values of Error.Error.
const (
	CodeOutOfStock           = "OUT_OF_STOCK"
	CodeAlreadyUsed          = "ALREADY_USED"
	CodeNotEligible          = "NOT_ELIGIBLE"
	CodeVoucherNotFound      = "VOUCHER_NOT_FOUND"
	CodeReservationNotFound  = "RESERVATION_NOT_FOUND"
	CodeReservationReleased  = "RESERVATION_RELEASED"
	CodeReservationConfirmed = "RESERVATION_CONFIRMED"
	CodeReservationRefunded  = "RESERVATION_REFUNDED"
	CodeNotConfirmed         = "RESERVATION_NOT_CONFIRMED" // a refund of a reservation not confirmed: release it
	CodeLimitBelowUsed       = "LIMIT_BELOW_USED"
	CodeVoucherInUse         = "VOUCHER_IN_USE"
	CodeOrderAmbiguous       = "ORDER_AMBIGUOUS" // several shoppers reserved the orderId: name the customer
	CodeVoucherExists        = "VOUCHER_EXISTS"
	CodeBadRequest           = "BAD_REQUEST"
	CodePayloadTooLarge      = "PAYLOAD_TOO_LARGE"
	CodeNotFound             = "NOT_FOUND"
	CodeMethodNotAllowed     = "METHOD_NOT_ALLOWED"
	CodeUnauthorized         = "UNAUTHORIZED"
	CodeForbidden            = "FORBIDDEN"
	CodeTooManyConnections   = "TOO_MANY_CONNECTIONS" // the edge: too many open from one address
	CodeUnavailable          = "UNAVAILABLE"
	CodeInternal             = "INTERNAL"
)

// Reservation statuses as stored and as answered.
const (
	StatusReserved  = "RESERVED"
	StatusConfirmed = "CONFIRMED"
	StatusReleased  = "RELEASED"
	StatusRefunded  = "REFUNDED"
)

// ErrorPrefix starts every error answer's body ({"error":"CODE",…}).
var ErrorPrefix = []byte(`{"error":"`)

// OutcomeCode is the code that follows prefix (ErrorPrefix, or a dry run's refusal prefix) at the
// start of an answer's body, or "OK" when the body does not start so: what the metrics count an
// answer under. A code is at most 32 bytes.
func OutcomeCode(body, prefix []byte) string {
	if !bytes.HasPrefix(body, prefix) {
		return "OK"
	}
	rest := body[len(prefix):]
	if end := bytes.IndexByte(rest, '"'); end > 0 && end <= 32 {
		return string(rest[:end])
	}
	return "OK"
}
