package voucher

import (
	"context"
	"fmt"
)

// expireBatch is how many holds one expiry transaction round releases.
const expireBatch = 500

// ExpireHolds releases every hold not confirmed within the hold time: in the database first
// (used_count fixed in the same transaction), then in Redis for flash vouchers, telling the
// edges when that brings a sold-out voucher back. Safe to run in several backends at once.
func (s *Service) ExpireHolds(ctx context.Context) (int, error) {
	total := 0
	for {
		released, err := s.store.ExpireHolds(ctx, s.cfg.Clock.Now(), expireBatch)
		for _, r := range released {
			if v, verr := s.voucher(ctx, r.VoucherCode); verr == nil && v.FlashSale && s.gate != nil {
				s.ReleaseInGate(r.VoucherCode, r.OrderID)
			}
		}
		total += len(released)
		if err != nil {
			return total, fmt.Errorf("expire holds: %w", err)
		}
		if len(released) < expireBatch {
			return total, nil
		}
	}
}
