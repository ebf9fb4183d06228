package voucher

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// forgetWindow is how long after a flash voucher becomes due to be forgotten its keys are still
// looked for: any run of ForgetEnded in that week deletes them, and older vouchers are not
// listed again, so a run's work does not grow with every sale ever held.
const forgetWindow = 7 * 24 * time.Hour

// ForgetEnded deletes from Redis every flash voucher that ended more than after ago (but not
// more than after plus a week): with noeviction, the keys of every past sale would otherwise
// stay in memory for good. PostgreSQL keeps the voucher and its redemptions; a call that still
// reaches the gate for it loads it again. It returns how many it deleted.
//
// after must outlast whatever may still touch the gate for an ended voucher: holds (VG_HOLD_TTL)
// and the day reconciliation keeps reconciling it (ReconcileAll).
func (s *Service) ForgetEnded(ctx context.Context, after time.Duration) (int, error) {
	if s.gate == nil {
		return 0, nil
	}
	due := s.cfg.Clock.Now().Add(-after)
	list, err := s.store.FlashVouchers(ctx, due.Add(-forgetWindow))
	if err != nil {
		return 0, s.unavailable(err, "forget ended vouchers")
	}
	n := 0
	var errs []error
	for _, v := range list {
		if v.EndsAt.After(due) {
			continue
		}
		forgotten, err := s.gate.Forget(ctx, v.Code)
		if err != nil {
			errs = append(errs, fmt.Errorf("forget %s: %w", v.Code, err))
			continue
		}
		if forgotten {
			n++
		}
	}
	return n, errors.Join(errs...)
}
