package voucher

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Edit is a change of a live voucher (PATCH /admin/vouchers/{code}): each field set is changed,
// the others stay. Code and FlashSale never change.
type Edit struct {
	DiscountAmount    *int64 // a fixed amount off: the percentage and its cap go
	DiscountPercent   *int   // a percentage off: the fixed amount goes, a cap stays
	MaxDiscountAmount *int64 // the percentage's cap
	NoMaxDiscount     bool   // the percentage's cap goes
	MinOrderAmount    *int64
	TotalLimit        *int
	PerUserLimit      *int
	StartsAt, EndsAt  *time.Time
	Active            *bool          // false pauses, true resumes
	HoldTTL           *time.Duration // 0: back to the service's (VG_HOLD_TTL)
}

// apply is v, whose used_count is used, with e applied, or why it cannot be: ErrLimitBelowUsed,
// ErrBadEdit (wrapped with what is wrong). It checks what depends on the voucher as it stands;
// each field's own bounds are the decoder's.
func (e Edit) apply(v Voucher, used int) (Voucher, error) {
	if e.DiscountAmount != nil {
		v.DiscountAmount, v.DiscountPercent, v.MaxDiscountAmount = *e.DiscountAmount, 0, nil
	}
	if e.DiscountPercent != nil {
		v.DiscountPercent, v.DiscountAmount = *e.DiscountPercent, 0
	}
	if e.NoMaxDiscount {
		v.MaxDiscountAmount = nil
	}
	if e.MaxDiscountAmount != nil {
		if v.DiscountPercent == 0 {
			return v, explain(ErrBadEdit, "maxDiscountAmount caps a percentage, and %s takes a fixed amount off; send discountPercent with it",
				v.Code)
		}
		m := *e.MaxDiscountAmount
		v.MaxDiscountAmount = &m
	}
	if e.MinOrderAmount != nil {
		v.MinOrderAmount = *e.MinOrderAmount
	}
	if e.TotalLimit != nil {
		if *e.TotalLimit < used {
			return v, explain(ErrLimitBelowUsed, "totalLimit %d is below the %d uses taken", *e.TotalLimit, used)
		}
		v.TotalLimit = *e.TotalLimit
	}
	if e.PerUserLimit != nil {
		v.PerUserLimit = *e.PerUserLimit
	}
	if e.StartsAt != nil {
		v.StartsAt = *e.StartsAt
	}
	if e.EndsAt != nil {
		v.EndsAt = *e.EndsAt
	}
	if !v.EndsAt.After(v.StartsAt) {
		return v, explain(ErrBadEdit, "endsAt %s must be after startsAt %s",
			v.EndsAt.UTC().Format(time.RFC3339), v.StartsAt.UTC().Format(time.RFC3339))
	}
	if e.Active != nil {
		v.Paused = !*e.Active
	}
	if e.HoldTTL != nil {
		v.HoldTTL = *e.HoldTTL
	}
	return v, nil
}

// Diff returns the fields that differ between two definitions of a voucher, by the admin API's
// names, as they were and as they are: what a change record holds. Times are compared as
// instants at the database's microsecond; a percentage of 0, a missing cap and the service's
// hold time are null.
func Diff(before, after Voucher) (was, now map[string]any) {
	was, now = map[string]any{}, map[string]any{}
	for _, f := range []struct {
		name string
		a, b any
	}{
		{"discountAmount", before.DiscountAmount, after.DiscountAmount},
		{"discountPercent", orNull(before.DiscountPercent), orNull(after.DiscountPercent)},
		{"maxDiscountAmount", deref(before.MaxDiscountAmount), deref(after.MaxDiscountAmount)},
		{"minOrderAmount", before.MinOrderAmount, after.MinOrderAmount},
		{"totalLimit", before.TotalLimit, after.TotalLimit},
		{"perUserLimit", before.PerUserLimit, after.PerUserLimit},
		{"startsAt", instant(before.StartsAt), instant(after.StartsAt)},
		{"endsAt", instant(before.EndsAt), instant(after.EndsAt)},
		{"active", !before.Paused, !after.Paused},
		{"holdTtl", holdTTLOrNull(before.HoldTTL), holdTTLOrNull(after.HoldTTL)},
	} {
		if f.a != f.b {
			was[f.name], now[f.name] = f.a, f.b
		}
	}
	return was, now
}

func orNull(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func instant(t time.Time) string { return t.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano) }

func holdTTLOrNull(d time.Duration) any {
	if d == 0 {
		return nil
	}
	return d.String()
}

// Edit changes the voucher code as e says, in PostgreSQL and, for a flash voucher, in the Redis
// gate, atomically with respect to every reservation in flight (Store.EditVoucher holds the
// voucher's row lock while the gate takes the new definition, configure.lua, and until the
// commit):
//
//   - totalLimit: never below the uses taken (ErrLimitBelowUsed: the database's used_count,
//     and the gate's held orders, those being written included); the gate's remaining becomes
//     the new limit minus what it holds, so a raise sells the new uses at once and a cut
//     never takes it below 0;
//   - active false pauses: the gate, the database's guarded writes and the edges refuse new
//     orders, granted ones keep their answers, confirm and release work; true resumes;
//   - perUserLimit: a customer above a lowered limit keeps their holds and gets no more;
//   - the discount, minimum, period and hold time apply to reservations decided after it.
//
// The edges are told the voucher's state again (sold out, paused, or neither). It returns the
// voucher as it now is. Errors: ErrVoucherNotFound, ErrLimitBelowUsed, ErrBadEdit, ErrUnavailable.
func (s *Service) Edit(ctx context.Context, code string, e Edit) (Voucher, error) {
	gateTook := false
	var configured Configured
	before, after, err := s.store.EditVoucher(ctx, code, s.cfg.Clock.Now(), e.apply,
		func(ctx context.Context, before, after Voucher) error {
			if !after.FlashSale || s.gate == nil {
				return nil
			}
			mode := ConfigureNewer
			if after.TotalLimit < before.TotalLimit {
				mode |= ConfigureChecked
			}
			c, err := s.gate.Configure(ctx, after, mode)
			if err == nil && !c.Applied && !c.Refused {
				// The gate holds this revision or a newer one while the database holds the one
				// before, under the lock: an edit whose commit failed left it. Ours replaces it.
				c, err = s.gate.Configure(ctx, after, mode|ConfigureForce)
			}
			switch {
			case err != nil:
				return s.unavailable(err, "edit %s: give the redis gate revision %d", code, after.Revision)
			case c.Refused:
				return explain(ErrLimitBelowUsed, "totalLimit %d is below the %d uses taken (orders being written included)",
					after.TotalLimit, c.Held)
			}
			gateTook, configured = true, c
			return nil
		})
	if err != nil {
		if gateTook {
			// The gate took a revision whose commit failed, or may have: give it the database's.
			s.repairGateNow(code)
		}
		return Voucher{}, s.unavailable(err, "edit %s", code)
	}
	s.remember(after)
	s.counts.showLimit(after)
	if after.Revision != before.Revision && after.FlashSale && s.gate != nil {
		if configured.Loaded {
			s.counts.usesLeft.WithLabelValues(code).Set(float64(max(configured.Remaining, 0)))
		}
		s.notify.HoldersChanged(code) // paused, resumed, sold out or back: the state as it now is
	}
	return after, nil
}

// repairGate gives the gate the database's definition of the voucher when it holds an older
// one, or a newer one the database never committed (an edit's commit that failed after the
// gate took its revision). It reads the voucher under a lock an edit waits for, so no edit can
// be committing meanwhile: a gate revision above the database's is then certainly one never
// committed.
func (s *Service) repairGate(ctx context.Context, code string) error {
	if s.gate == nil {
		return nil
	}
	return s.store.WithVoucher(ctx, code, func(ctx context.Context, v Voucher) error {
		if !v.FlashSale {
			return nil
		}
		c, err := s.gate.Configure(ctx, v, ConfigureNewer)
		if err == nil && !c.Applied && c.HeldRevision > v.Revision {
			s.cfg.Log.Warn("the redis gate held a revision the database never committed; giving it the database's",
				"code", v.Code, "gateRevision", c.HeldRevision, "revision", v.Revision)
			_, err = s.gate.Configure(ctx, v, ConfigureForce)
		}
		if err != nil {
			return fmt.Errorf("give the redis gate revision %d of %s: %w", v.Revision, v.Code, err)
		}
		s.notify.HoldersChanged(v.Code)
		return nil
	})
}

// repairGateNow is repairGate with its own deadline; a failure is logged (reconciliation
// repairs the gate later, and reservations meanwhile repair it themselves: reviseFlash).
func (s *Service) repairGateNow(code string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.DBTimeout)
	defer cancel()
	if err := s.repairGate(ctx, code); err != nil && !errors.Is(err, ErrVoucherNotFound) {
		s.cfg.Log.Warn("repair the redis gate's definition after a failed edit; reconciliation will", "code", code, "err", err)
	}
}

// Delete deletes a voucher that has never been redeemed, and its keys in the Redis gate, and
// tells the edges to forget it. Errors: ErrVoucherInUse (end it with an edit of endsAt
// instead), ErrVoucherNotFound, ErrUnavailable.
func (s *Service) Delete(ctx context.Context, code string) error {
	v, err := s.freshVoucher(ctx, code)
	if err != nil {
		return s.unavailable(err, "delete %s: read voucher", code)
	}
	if err := s.store.DeleteVoucher(ctx, code); err != nil {
		return s.unavailable(err, "delete %s", code)
	}
	s.vouchers.Delete(code)
	s.counts.forget(code)
	// Its writer knows whether its writes go to a flash voucher; one made again under the code
	// may be of the other kind. Writes still queued in it find no voucher.
	s.writers.Delete(code)
	if v.FlashSale && s.gate != nil {
		// Nothing of it is held for good: it never had a redemption. A failure leaves keys that
		// a voucher made again under the code drops when it is created (Create).
		if _, err := s.gate.Forget(ctx, code); err != nil {
			s.cfg.Log.Warn("delete a deleted voucher's redis keys", "code", code, "err", err)
		}
	}
	s.notify.Deleted(code)
	return nil
}
