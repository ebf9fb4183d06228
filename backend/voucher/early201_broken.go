//go:build vg_early201

package voucher

import (
	"context"

	"vouchergate/shared/wire"
)

// This build answers 201 as soon as the gate admits a winner and writes the row afterwards,
// in the background: a 201 whose write then fails has no row behind it (D4 broken). Only the
// test that proves the history check can fail builds it (make test-broken-build).
func init() {
	early201 = func(s *Service, ctx context.Context, v Voucher, h Hold, holder Holder) (Redemption, error) {
		go s.writeWinner(context.WithoutCancel(ctx), v, h, holder) // the answer went already
		return Redemption{VoucherCode: h.VoucherCode, CustomerID: h.CustomerID, OrderID: h.OrderID,
			Status: wire.StatusReserved, OrderAmount: h.OrderAmount, DiscountAmount: h.DiscountAmount,
			ReservedAt: h.ReservedAt, HoldExpiresAt: h.ExpiresAt}, nil
	}
}
