package voucher

import (
	"errors"
	"fmt"
)

// outcome is a domain outcome: an answer for the client, which the API maps to a status and
// error code in one place, never a failure to wrap. Being of this type is what makes an error
// one (isDomain), so the list of outcomes is this block alone.
type outcome struct {
	text string
	of   error // the broader outcome this one is a case of (ErrPaused of ErrNotEligible), or nil
}

func (o *outcome) Error() string { return o.text }
func (o *outcome) Unwrap() error { return o.of }

// explained is a domain outcome told with what made it (which limit, which field): the
// client reads the explanation, errors.Is finds the outcome.
type explained struct {
	of   error
	text string
}

func (e *explained) Error() string { return e.text }
func (e *explained) Unwrap() error { return e.of }

// explain returns outcome of, told as format says.
func explain(of error, format string, args ...any) error {
	return &explained{of: of, text: fmt.Sprintf(format, args...)}
}

// isDomain reports whether err is, or wraps, a domain outcome.
func isDomain(err error) bool {
	var o *outcome
	return errors.As(err, &o)
}

// Domain outcomes.
var (
	// ErrVoucherNotFound: no voucher has the code.
	ErrVoucherNotFound error = &outcome{text: "voucher not found"}
	// ErrVoucherExists: a voucher with the code exists already.
	ErrVoucherExists error = &outcome{text: "voucher exists"}
	// ErrOutOfStock: no use is left.
	ErrOutOfStock error = &outcome{text: "out of stock"}
	// ErrAlreadyUsed: the customer holds per_user_limit uses, or the orderId belongs to another
	// customer or voucher.
	ErrAlreadyUsed error = &outcome{text: "already used"}
	// ErrNotEligible: the voucher takes no new reservation for this order now. Each of the four
	// below is a case of it (errors.Is) that says why; a store that cannot tell returns it bare.
	ErrNotEligible error = &outcome{text: "not eligible"}
	// ErrNotStarted: before the voucher's startsAt.
	ErrNotStarted error = &outcome{"not eligible: the voucher has not started", ErrNotEligible}
	// ErrEnded: at or after the voucher's endsAt.
	ErrEnded error = &outcome{"not eligible: the voucher has ended", ErrNotEligible}
	// ErrOrderTooSmall: the order amount is below the voucher's minOrderAmount.
	ErrOrderTooSmall error = &outcome{"not eligible: the order is below the voucher's minimum amount", ErrNotEligible}
	// ErrPaused: the voucher is paused (active false).
	ErrPaused error = &outcome{"not eligible: the voucher is paused", ErrNotEligible}
	// ErrReservationNotFound: the voucher has no reservation for the orderId.
	ErrReservationNotFound error = &outcome{text: "reservation not found"}
	// ErrOrderAmbiguous: a caller acting for anyone named an orderId that several shoppers
	// reserved, each in their own scope, without saying whose.
	ErrOrderAmbiguous error = &outcome{text: "order ambiguous"}
	// ErrReleased: the reservation was released (cancelled or expired); it cannot be confirmed
	// or reserved again.
	ErrReleased error = &outcome{text: "reservation released"}
	// ErrConfirmed: the reservation was confirmed; it cannot be released.
	ErrConfirmed error = &outcome{text: "reservation confirmed"}
	// ErrNotConfirmed: the reservation is still RESERVED; only a confirmed one is refunded (a
	// reserved one is released).
	ErrNotConfirmed error = &outcome{text: "reservation not confirmed"}
	// ErrRefunded: the reservation was refunded; its use went back, and it cannot be
	// confirmed, released or reserved again.
	ErrRefunded error = &outcome{text: "reservation refunded"}
	// ErrLimitBelowUsed: an edit would take totalLimit below the uses taken (the database's
	// used_count, or for a flash voucher the uses its gate holds, those being written included).
	ErrLimitBelowUsed error = &outcome{text: "totalLimit below the uses taken"}
	// ErrBadEdit: an edit the voucher as it stands cannot take (endsAt not after startsAt once
	// applied, a cap on a fixed discount); the error wrapping it says which.
	ErrBadEdit error = &outcome{text: "edit refused"}
	// ErrVoucherInUse: the voucher has redemptions, so it cannot be deleted (end it instead).
	ErrVoucherInUse error = &outcome{text: "voucher in use"}
	// ErrUnavailable: a store could not be reached or did not answer in time; the client may
	// retry with the same orderId.
	ErrUnavailable error = &outcome{text: "unavailable"}
)

// Errors between this package and its stores.
var (
	// ErrOrderExists: Store.Reserve found the orderId already redeemed (by this request's
	// earlier attempt or by another); nothing was written.
	ErrOrderExists = errors.New("order already has a redemption")
	// ErrNotWritten wraps an infrastructure error when the store is certain nothing was
	// committed (the statement was refused, or never sent), so the gate's use may be given back.
	// An infrastructure error without it leaves the outcome unknown.
	ErrNotWritten = errors.New("not written")
)
