package app

import (
	"context"
	"errors"
	"time"

	"vouchergate/backend/voucher"
)

// CreateDemo creates flash voucher code (100 off, 1,000 uses, one per customer, open for a
// week from now) unless it exists, so `make run` has something to reserve.
func (a *App) CreateDemo(ctx context.Context, code string) error {
	now := time.Now()
	err := a.Vouchers.Create(ctx, voucher.Voucher{
		Code: code, DiscountAmount: 100, TotalLimit: 1000, PerUserLimit: 1,
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(7 * 24 * time.Hour), FlashSale: true,
	})
	if errors.Is(err, voucher.ErrVoucherExists) {
		return nil
	}
	return err
}
