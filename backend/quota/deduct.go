package quota

import (
	"context"
	"math/rand/v2"
	"strconv"
)

// DeductResult is the answer to a deduct, the same for every retry of it.
type DeductResult struct {
	IdemKey  string
	Counters []Counter // every counter the items touched, after the deduct
}

// Deduct takes each item's amount from every counter the rules imply for it, or from none.
// Identities are visited one by one in a fixed order; if one has no room, the steps this call
// took are given back and the answer is an *ExceededError. The same idemKey again returns the
// first answer and changes nothing (even while the first call is still running).
//
// Errors: ErrInvalid, ErrQuotaExceeded, ErrRolledBack, ErrIdemKeyReused, ErrUnavailable. After
// ErrUnavailable the outcome may be unknown: retry with the same idemKey, or roll it back.
//
// A call that failed (an error or a timeout) leaves its outcome unknown, and nothing is undone
// then: another attempt of the idemKey may have replayed the steps and answered 200 meanwhile.
// The steps stay recorded for the client's retry, which replays them, or its rollback, which
// gives them back; the request is registered before any step counts, so the rollback finds
// them.
func (s *Service) Deduct(ctx context.Context, bizID int64, idemKey string, items []Item) (DeductResult, error) {
	if err := validateDeduct(bizID, idemKey, items); err != nil {
		return DeductResult{}, err
	}
	s.stats.deducts.Add(1)
	now := s.cfg.Clock.Now()
	steps, err := plan(s.cfg.KeyPrefix, bizID, items, s.rules.current(), now)
	if err != nil {
		return DeductResult{}, err
	}
	nowMs := now.UnixMilli()
	attempt := strconv.FormatUint(rand.Uint64(), 36)
	tags := make([]string, len(steps))
	for i := range steps {
		tags[i] = identityTag(steps[i].identityType, steps[i].identity)
	}
	results := make([]stepResult, len(steps))

	registered, r, err := s.gate.registerAndDeduct(ctx, requestKey(s.cfg.KeyPrefix, bizID, idemKey),
		tags, &steps[0], idemKey, attempt, nowMs)
	if err != nil {
		s.stats.unavailable.Add(1)
		return DeductResult{}, unavailable("deduct "+idemKey, err)
	}
	results[0] = r
	if !registered {
		s.undoTaken(ctx, steps, results[:1], idemKey, attempt)
		s.stats.rolledBack.Add(1)
		return DeductResult{}, ErrRolledBack
	}
	for i := 0; ; i++ {
		if err := s.refused(steps, results, i); err != nil {
			s.undoTaken(ctx, steps, results[:i], idemKey, attempt)
			return DeductResult{}, err
		}
		if i+1 == len(steps) {
			break
		}
		r, err := s.gate.deduct(ctx, &steps[i+1], idemKey, attempt, nowMs)
		if err != nil {
			s.stats.unavailable.Add(1)
			return DeductResult{}, unavailable("deduct "+idemKey, err)
		}
		results[i+1] = r
	}
	res, err := s.answer(idemKey, steps, results)
	if err != nil {
		s.stats.unavailable.Add(1)
		return res, err
	}
	s.stats.taken.Add(1)
	return res, nil
}

// refused turns a step's refusal into the error to answer, or nil.
func (s *Service) refused(steps []step, results []stepResult, i int) error {
	r := &results[i]
	switch r.status {
	case stepReplayed:
		s.stats.replayed.Add(1)
	case stepFull:
		s.stats.exceeded.Add(1)
		st := &steps[i]
		c := &st.counters[r.full]
		return &ExceededError{
			Counter: Counter{IdentityType: st.identityType, Identity: st.identity, Dimension: c.dimension,
				Window: *c.window, Used: r.fullAt.used, Limit: c.limit,
				ResetsAt: resetsAt(c.kind, c.msField(), r.fullAt, c.window.Location())},
			Requested: c.amount,
		}
	case stepRolledBack:
		s.stats.rolledBack.Add(1)
		return ErrRolledBack
	case stepReused:
		s.stats.reused.Add(1)
		return ErrIdemKeyReused
	}
	return nil
}

func (c *counterPlan) msField() int64 {
	if c.kind == 'C' {
		return c.resetsAt
	}
	return c.span
}

// undoTaken gives back the steps this attempt took itself. A step it found taken by another
// attempt of the same idemKey is that attempt's to keep or give back.
func (s *Service) undoTaken(ctx context.Context, steps []step, results []stepResult, idemKey, attempt string) {
	for i := range results {
		if results[i].status == stepTaken {
			s.undo(ctx, steps[i:i+1], idemKey, attempt)
		}
	}
}

// undo gives back steps this attempt took after a refusal. It runs even when ctx has ended,
// bounded by UndoTimeout; a step it cannot give back stays recorded, so a retry answers from
// it and a rollback gives it back.
func (s *Service) undo(ctx context.Context, steps []step, idemKey, attempt string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.UndoTimeout)
	defer cancel()
	for i := range steps {
		if err := s.gate.undo(ctx, &steps[i], idemKey, attempt); err != nil {
			s.stats.undoFailed.Add(1)
			s.cfg.Log.Warn("quota: undo a deduct step; it stays until retried or rolled back",
				"idemKey", idemKey, "identityType", steps[i].identityType, "err", err)
		}
	}
}

// answer builds the result from each step's own or replayed outcome.
func (s *Service) answer(idemKey string, steps []step, results []stepResult) (DeductResult, error) {
	n := 0
	for i := range steps {
		n += len(steps[i].counters)
	}
	out := DeductResult{IdemKey: idemKey, Counters: make([]Counter, 0, n)}
	for i := range steps {
		st, r := &steps[i], &results[i]
		if r.status == stepReplayed {
			cs, err := replayed(st, r)
			if err != nil {
				return DeductResult{}, unavailable("deduct "+idemKey+": read the first answer", err)
			}
			out.Counters = append(out.Counters, cs...)
			continue
		}
		us, err := parseUsed(r.used, len(st.counters))
		if err != nil {
			return DeductResult{}, unavailable("deduct "+idemKey, err)
		}
		for j := range st.counters {
			c := &st.counters[j]
			out.Counters = append(out.Counters, Counter{IdentityType: st.identityType, Identity: st.identity,
				Dimension: c.dimension, Window: *c.window, Used: us[j].used, Limit: c.limit,
				ResetsAt: resetsAt(c.kind, c.msField(), us[j], c.window.Location())})
		}
	}
	return out, nil
}

// replayed rebuilds the counters of a step that an earlier attempt took.
func replayed(st *step, r *stepResult) ([]Counter, error) {
	rs, err := parseRecord(r.record)
	if err != nil {
		return nil, err
	}
	us, err := parseUsed(r.used, len(rs))
	if err != nil {
		return nil, err
	}
	out := make([]Counter, len(rs))
	for j := range rs {
		w, err := ParseWindowID(rs[j].windowID)
		if err != nil {
			return nil, err
		}
		out[j] = Counter{IdentityType: st.identityType, Identity: st.identity, Dimension: rs[j].dim,
			Window: w, Used: us[j].used, Limit: rs[j].limit,
			ResetsAt: resetsAt(rs[j].kind, rs[j].ms, us[j], w.Location())}
	}
	return out, nil
}
