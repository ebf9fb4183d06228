package voucher

import "errors"

// Domain outcomes. The API maps each to a status and error code in one place.
var (
	// ErrVoucherNotFound: no voucher has the code.
	ErrVoucherNotFound = errors.New("voucher not found")
	// ErrVoucherExists: a voucher with the code exists already.
	ErrVoucherExists = errors.New("voucher exists")
	// ErrOutOfStock: no use is left.
	ErrOutOfStock = errors.New("out of stock")
	// ErrAlreadyUsed: the customer holds per_user_limit uses, or the orderId belongs to another
	// customer or voucher.
	ErrAlreadyUsed = errors.New("already used")
	// ErrNotEligible: the voucher is not open at this time, or the order is below its minimum.
	ErrNotEligible = errors.New("not eligible")
	// ErrReservationNotFound: the voucher has no reservation for the orderId.
	ErrReservationNotFound = errors.New("reservation not found")
	// ErrReleased: the reservation was released (cancelled or expired); it cannot be confirmed
	// or reserved again.
	ErrReleased = errors.New("reservation released")
	// ErrConfirmed: the reservation was confirmed; it cannot be released.
	ErrConfirmed = errors.New("reservation confirmed")
	// ErrUnavailable: a store could not be reached or did not answer in time; the client may
	// retry with the same orderId.
	ErrUnavailable = errors.New("unavailable")
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
