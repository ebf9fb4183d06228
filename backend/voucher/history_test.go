package voucher_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"vouchergate/backend/backendtest/history"
	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// A concurrent sale's reservations are recorded in its test's history (history.For), checked
// against the voucher model when the test ends.

var (
	salesMu sync.Mutex
	sales   = map[*voucher.Service]*history.Recorder{}
)

// recordSale records the reservations recordedReserve sends through e in t's history, and
// tells it v's limits.
func recordSale(t testing.TB, e *env, v voucher.Voucher) {
	rec := history.For(t)
	rec.Voucher(v.Code, history.Voucher{TotalLimit: v.TotalLimit, PerUserLimit: v.PerUserLimit, Discount: v.DiscountAmount})
	salesMu.Lock()
	sales[e.svc] = rec
	salesMu.Unlock()
	t.Cleanup(func() {
		salesMu.Lock()
		delete(sales, e.svc)
		salesMu.Unlock()
	})
}

// recordedReserve is e.svc.Reserve, recorded if recordSale was told of e.
func recordedReserve(ctx context.Context, e *env, req voucher.Request) (voucher.Redemption, error) {
	salesMu.Lock()
	rec := sales[e.svc]
	salesMu.Unlock()
	if rec == nil {
		return e.svc.Reserve(ctx, req)
	}
	c := rec.Begin(history.Op{Kind: history.Reserve, Voucher: req.Code, Customer: req.CustomerID, Order: req.OrderID, Amount: req.OrderAmount})
	r, err := e.svc.Reserve(ctx, req)
	if err == nil {
		c.Op.Discount, c.Op.Holder = r.DiscountAmount, r.CustomerID
		c.Ok()
		return r, nil
	}
	if code := refusal(err); code != "" {
		c.Fail(code)
	} else {
		c.Info(err.Error()) // ErrUnavailable, or a failure: the outcome is unknown
	}
	return r, err
}

// refusal is the error code of a domain refusal (nothing was done), "" for anything else.
func refusal(err error) string {
	for _, r := range []struct {
		err  error
		code string
	}{
		{voucher.ErrOutOfStock, wire.CodeOutOfStock},
		{voucher.ErrAlreadyUsed, wire.CodeAlreadyUsed},
		{voucher.ErrNotEligible, wire.CodeNotEligible},
		{voucher.ErrReleased, wire.CodeReservationReleased},
		{voucher.ErrConfirmed, wire.CodeReservationConfirmed},
		{voucher.ErrReservationNotFound, wire.CodeReservationNotFound},
		{voucher.ErrOrderAmbiguous, wire.CodeOrderAmbiguous},
	} {
		if errors.Is(err, r.err) && !errors.Is(err, voucher.ErrUnavailable) {
			return r.code
		}
	}
	return ""
}
