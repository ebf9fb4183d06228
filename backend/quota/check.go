package quota

import (
	"context"
	"fmt"
	"time"
)

// Check answers what Deduct would answer now for the same request, changing nothing: it reads
// the keys each identity's deduct would touch (quota_check.lua, one call per identity, in the
// deduct's order) and the request's rolled-back mark, and writes none. A pass is the result a
// deduct would return, its counters as they would stand after it; an idemKey that deducted
// already answers its recorded counters, as a retry would. It is advisory: another deduct may
// take the room between Check and Deduct.
//
// Errors: as Deduct's: ErrInvalid, ErrQuotaExceeded (an *ExceededError), ErrRolledBack,
// ErrIdemKeyReused, ErrUnavailable; and, as Deduct, a degraded pass in place of ErrUnavailable
// for a business line that degrades OPEN.
func (s *Service) Check(ctx context.Context, bizID int64, idemKey string, items []Item) (DeductResult, error) {
	return s.As("").Check(ctx, bizID, idemKey, items)
}

// Check is Service.Check with the caller's idemKeys.
func (c Caller) Check(ctx context.Context, bizID int64, idemKey string, items []Item) (DeductResult, error) {
	if err := validateDeduct(bizID, idemKey, items); err != nil {
		return DeductResult{}, err
	}
	s := c.s
	if s.degrades(ctx, bizID, items) {
		if res, ok := s.degraded(bizID, idemKey, nil); ok {
			return res, nil
		}
	}
	res, err := s.check(ctx, bizID, c.stored(idemKey), items)
	res.IdemKey = idemKey
	if d, ok := s.degraded(bizID, idemKey, err); err != nil && ok {
		return d, nil
	}
	return res, err
}

func (s *Service) check(ctx context.Context, bizID int64, idemKey string, items []Item) (DeductResult, error) {
	now := s.cfg.Clock.Now()
	steps, err := plan(s.cfg.KeyPrefix, bizID, items, s.rules.current(), now)
	if err != nil {
		return DeductResult{}, err
	}
	unruled, err := s.unruled(bizID, steps)
	if err != nil {
		return DeductResult{}, err
	}
	res, err := s.checkSteps(ctx, bizID, idemKey, steps, now)
	res.Unruled = unruled && err == nil
	return res, err
}

// checkSteps reads what the planned steps would do: check's calls to Redis.
func (s *Service) checkSteps(ctx context.Context, bizID int64, idemKey string, steps []step, now time.Time) (DeductResult, error) {
	rolledBack, err := s.scripts.rolledBack(ctx, requestKey(s.cfg.KeyPrefix, bizID, idemKey))
	switch {
	case err != nil:
		return DeductResult{}, unavailable("check "+idemKey, fmt.Errorf("read the request: %w", err))
	case rolledBack:
		return DeductResult{}, ErrRolledBack
	}
	results := make([]stepResult, len(steps))
	for i := range steps {
		if results[i], err = s.scripts.check(ctx, &steps[i], idemKey, now.UnixMilli()); err != nil {
			return DeductResult{}, unavailable("check "+idemKey, err)
		}
		if err := refusal(idemKey, steps, results, i); err != nil {
			return DeductResult{}, err
		}
	}
	return s.answer(idemKey, steps, results, false)
}
