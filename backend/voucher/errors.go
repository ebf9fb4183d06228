package voucher

import "errors"

// outcome is a domain outcome: an answer for the client, which the API maps to a status and
// error code in one place, never a failure to wrap. Being of this type is what makes an error
// one (isDomain), so the list of outcomes is this block alone.
type outcome struct{ text string }

func (o *outcome) Error() string { return o.text }

// isDomain reports whether err is, or wraps, a domain outcome.
func isDomain(err error) bool {
	var o *outcome
	return errors.As(err, &o)
}

// Domain outcomes.
var (
	// ErrVoucherNotFound: no voucher has the code.
	ErrVoucherNotFound error = &outcome{"voucher not found"}
	// ErrVoucherExists: a voucher with the code exists already.
	ErrVoucherExists error = &outcome{"voucher exists"}
	// ErrOutOfStock: no use is left.
	ErrOutOfStock error = &outcome{"out of stock"}
	// ErrAlreadyUsed: the customer holds per_user_limit uses, or the orderId belongs to another
	// customer or voucher.
	ErrAlreadyUsed error = &outcome{"already used"}
	// ErrNotEligible: the voucher is not open at this time, or the order is below its minimum.
	ErrNotEligible error = &outcome{"not eligible"}
	// ErrReservationNotFound: the voucher has no reservation for the orderId.
	ErrReservationNotFound error = &outcome{"reservation not found"}
	// ErrOrderAmbiguous: a caller acting for anyone named an orderId that several shoppers
	// reserved, each in their own scope, without saying whose.
	ErrOrderAmbiguous error = &outcome{"order ambiguous"}
	// ErrReleased: the reservation was released (cancelled or expired); it cannot be confirmed
	// or reserved again.
	ErrReleased error = &outcome{"reservation released"}
	// ErrConfirmed: the reservation was confirmed; it cannot be released.
	ErrConfirmed error = &outcome{"reservation confirmed"}
	// ErrUnavailable: a store could not be reached or did not answer in time; the client may
	// retry with the same orderId.
	ErrUnavailable error = &outcome{"unavailable"}
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
