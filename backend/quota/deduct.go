package quota

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// DeductResult is the answer to a deduct, the same for every retry of it.
type DeductResult struct {
	IdemKey  string
	Counters []Counter // every counter the items touched, after the deduct
	// WouldExceed lists the SHADOW rules that would have refused this deduct.
	WouldExceed []WouldExceed
	// Degraded: Redis could not be reached and the business line degrades OPEN; nothing was
	// counted, Counters is empty.
	Degraded bool
	// Unruled: no rule covers the items, so nothing was limited and Counters is empty
	// (unruled.go).
	Unruled bool
}

// Deduct takes each item's amount from every counter the rules imply for it, or from none.
// Identities are visited one by one in a fixed order; if one has no room, the steps this call
// holds are given back and the answer is an *ExceededError. The same idemKey again returns the
// first answer and changes nothing (even while the first call is still running).
//
// Errors: ErrInvalid, ErrQuotaExceeded, ErrRolledBack, ErrIdemKeyReused, ErrUnavailable. After
// ErrUnavailable the outcome may be unknown: retry with the same idemKey, or roll it back.
//
// When Redis cannot be reached and bizID's business line is set to whenUnavailable OPEN, the
// answer is a pass with Degraded set instead of ErrUnavailable: nothing counted, except what a
// step interrupted by the failure may have counted (an outcome unknown as any other, which a
// rollback gives back once Redis answers).
//
// A deduct answered 200 stays counted until its rollback, however the attempts of one idemKey
// (a client's retries, running at once on any backend) interleave:
//   - An outcome that is unknown (a call failed or timed out) is never undone: the steps stay
//     recorded for the client's retry, which replays them, or its rollback, which gives them
//     back. The request is registered before any step counts, so that rollback finds them.
//   - The attempt that last took or replayed a step holds it, and only the holder may undo it,
//     so an attempt does not undo a step that a later one relies on.
//   - A request of several identities is settled once on its record (quota_settle.lua): an
//     attempt answers 200 only after completing it under the generation it registered under,
//     and gives back only after bumping the generation, never once complete. An attempt that
//     relied on a step given back registered before that bump, so it cannot complete: it gives
//     back what it holds and answers "retry". A request of one identity needs no settling: a
//     refusal there holds nothing, so none of its steps is ever undone.
func (s *Service) Deduct(ctx context.Context, bizID int64, idemKey string, items []Item) (DeductResult, error) {
	return s.As("").Deduct(ctx, bizID, idemKey, items)
}

// Deduct is Service.Deduct with the caller's idemKeys.
func (c Caller) Deduct(ctx context.Context, bizID int64, idemKey string, items []Item) (DeductResult, error) {
	s := c.s
	if err := validateDeduct(bizID, idemKey, items); err != nil {
		return DeductResult{}, err
	}
	s.metrics.deducts.Add(1)
	if s.degrades(ctx, bizID, items) {
		if res, ok := s.degraded(bizID, idemKey, nil); ok {
			return res, nil
		}
	}
	res, err := s.deduct(ctx, bizID, c.stored(idemKey), items)
	res.IdemKey = idemKey
	switch {
	case err == nil:
		s.metrics.taken.Add(1)
	case errors.Is(err, ErrUnavailable):
		if d, ok := s.degraded(bizID, idemKey, err); ok {
			s.warnSampled("degraded:"+strconv.FormatInt(bizID, 10), "quota: Redis unreachable; the business line degrades OPEN: answered without counting",
				"bizId", bizID, "idemKey", idemKey, "err", err)
			return d, nil
		}
		s.metrics.unavailable.Add(1)
	case errors.Is(err, ErrQuotaExceeded):
		s.metrics.exceeded.Add(1)
	case errors.Is(err, ErrRolledBack):
		s.metrics.rolledBack.Add(1)
	case errors.Is(err, ErrIdemKeyReused):
		s.metrics.reused.Add(1)
	}
	return res, err
}

// Why an attempt answers "retry" though Redis answered every call.
var (
	errGivingBack        = errors.New("another attempt of the idemKey is giving back its steps; retry for the answer")
	errCompleteElsewhere = errors.New("another attempt of the idemKey completed it; retry for the answer")
)

func (s *Service) deduct(ctx context.Context, bizID int64, idemKey string, items []Item) (DeductResult, error) {
	now := s.cfg.Clock.Now()
	steps, err := plan(s.cfg.KeyPrefix, bizID, items, s.rules.current(), now)
	if err != nil {
		return DeductResult{}, err
	}
	unruled, err := s.unruled(bizID, steps)
	if err != nil {
		return DeductResult{}, err
	}
	res, err := s.deductSteps(ctx, bizID, idemKey, steps, now)
	res.Unruled = unruled && err == nil
	return res, err
}

// deductSteps takes the planned steps: deduct's calls to Redis.
func (s *Service) deductSteps(ctx context.Context, bizID int64, idemKey string, steps []step, now time.Time) (DeductResult, error) {
	nowMs := now.UnixMilli()
	attempt := strconv.FormatUint(rand.Uint64(), 36)
	tags := make([]string, len(steps))
	for i := range steps {
		tags[i] = identityTag(steps[i].identityType, steps[i].identity)
	}
	reqKey := requestKey(s.cfg.KeyPrefix, bizID, idemKey)
	results := make([]stepResult, len(steps))

	// a failed call leaves its outcome unknown: nothing is undone (see Deduct)
	gen, r, err := s.scripts.begin(ctx, reqKey, tags, &steps[0], idemKey, attempt, nowMs)
	if err != nil {
		return DeductResult{}, unavailable("deduct "+idemKey, err)
	}
	results[0] = r
	for i := 0; ; i++ {
		if err := s.refused(idemKey, steps, results, i); err != nil {
			return DeductResult{}, s.abandon(ctx, bizID, reqKey, gen, steps[:i], results[:i], &results[i], idemKey, attempt, err)
		}
		if i+1 == len(steps) {
			break
		}
		if i+2 == len(steps) {
			r, err = s.scripts.last(ctx, reqKey, gen, &steps[i+1], idemKey, attempt, nowMs)
		} else {
			r, err = s.scripts.deduct(ctx, &steps[i+1], idemKey, attempt, nowMs, nil)
		}
		if err != nil {
			return DeductResult{}, unavailable("deduct "+idemKey, err)
		}
		results[i+1] = r
	}
	if end := &results[len(steps)-1]; len(steps) > 1 && end.settle != settleComplete {
		cause := unavailable("deduct "+idemKey, errGivingBack)
		if end.settle == settleRolledBack {
			cause = ErrRolledBack
		}
		return DeductResult{}, s.abandon(ctx, bizID, reqKey, gen, steps, results, end, idemKey, attempt, cause)
	}
	return s.answer(idemKey, steps, results, true)
}

// refused turns a step's refusal into the error to answer, or nil.
func (s *Service) refused(idemKey string, steps []step, results []stepResult, i int) error {
	if results[i].status == stepReplayed {
		s.metrics.replayed.Add(1)
	}
	return refusal(idemKey, steps, results, i)
}

// refusal is the error a step's refusal answers, or nil.
func refusal(idemKey string, steps []step, results []stepResult, i int) error {
	r := &results[i]
	switch r.status {
	case stepFull:
		st := &steps[i]
		c := &st.counters[r.full]
		v := c.view()
		return &ExceededError{Counter: v.counter(st.identityType, st.identity, r.fullAt), Requested: c.amount}
	case stepRolledBack:
		return ErrRolledBack
	case stepReused:
		return ErrIdemKeyReused
	case stepSuperseded:
		return unavailable("deduct "+idemKey, errGivingBack)
	}
	return nil
}

// abandon gives back the steps this attempt holds after it cannot complete the request, and
// returns the answer: cause, or ErrUnavailable when another attempt completed the request or a
// step could not be given back (it stays for the client's retry or rollback). end is the
// result that ended the attempt; unless its call settled the request, abandon first bumps the
// request's generation, so no attempt completes on a step given back. It runs even when ctx
// has ended, bounded by UndoTimeout.
func (s *Service) abandon(ctx context.Context, bizID int64, reqKey string, gen int64, steps []step, results []stepResult,
	end *stepResult, idemKey, attempt string, cause error) error {
	if !slices.ContainsFunc(results, func(r stepResult) bool { return held(r.status) }) {
		return cause
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.UndoTimeout)
	defer cancel()
	outcome := end.settle
	if !end.settled {
		var err error
		if outcome, err = s.scripts.settle(ctx, reqKey, "G", gen); err != nil {
			return unavailable("deduct "+idemKey+": settle before giving back", err)
		}
	}
	if outcome == settleComplete {
		return unavailable("deduct "+idemKey, errCompleteElsewhere)
	}
	kept := 0
	for i := range results {
		if !held(results[i].status) {
			continue
		}
		if err := s.scripts.undo(ctx, &steps[i], &results[i], idemKey, attempt); err != nil {
			kept++
			s.metrics.undoFailed.Add(1)
			s.warnSampled("undo failed:"+strconv.FormatInt(bizID, 10), "quota: give back a deduct step; it stays until retried or rolled back",
				"bizId", bizID, "idemKey", idemKey, "identityType", steps[i].identityType, "err", err)
		}
	}
	if kept > 0 {
		return unavailable("deduct "+idemKey, fmt.Errorf("%d step(s) not given back after %v; retry or roll back", kept, cause))
	}
	return cause
}

func (c *counterPlan) msField() int64 {
	if c.kind == 'C' {
		return c.resetsAt
	}
	return c.span
}

// counterView is what an answer says of one counter, from a plan or a record.
type counterView struct {
	dim         string
	window      Window
	kind        byte
	ms          int64 // 'C': the period's end; 'R': the window's size
	limit       int64 // -1: no ENFORCE rule implies it
	shadowRule  int64 // 0: no SHADOW rule implies it
	shadowLimit int64
}

func (c *counterPlan) view() counterView {
	v := counterView{dim: c.dimension, window: *c.window, kind: c.kind, ms: c.msField(), limit: -1}
	if c.enforced {
		v.limit = c.limit
	}
	if c.hasShadow {
		v.shadowRule, v.shadowLimit = c.shadowRule, c.shadowLimit
	}
	return v
}

// counter is the Counter of the view for an identity, standing at u.
func (v *counterView) counter(typ, identity string, u used) Counter {
	c := Counter{IdentityType: typ, Identity: identity, Dimension: v.dim, Window: v.window, Used: u.used, Limit: v.limit,
		ResetsAt: resetsAt(v.kind, v.ms, u, v.window.Location())}
	if v.limit < 0 {
		c.Limit, c.Shadow = v.shadowLimit, true
	}
	return c
}

// wouldExceed reports the view's SHADOW rule if c, the counter after a deduct, is past its
// limit: the rule, were it enforced, would have refused that deduct, whether it crossed the
// limit or found the counter past it already.
func (v *counterView) wouldExceed(c Counter) (WouldExceed, bool) {
	if v.shadowRule == 0 || c.Used <= v.shadowLimit {
		return WouldExceed{}, false
	}
	c.Limit, c.Shadow = v.shadowLimit, true
	return WouldExceed{RuleID: v.shadowRule, Counter: c}, true
}

// answer builds the result from each step's own or replayed outcome. first counts the SHADOW
// rules that would have refused the steps taken by this call (not replays) in the metrics.
func (s *Service) answer(idemKey string, steps []step, results []stepResult, first bool) (DeductResult, error) {
	n := 0
	for i := range steps {
		n += len(steps[i].counters)
	}
	out := DeductResult{IdemKey: idemKey, Counters: make([]Counter, 0, n)}
	for i := range steps {
		st, r := &steps[i], &results[i]
		if r.status == stepReplayed {
			if err := replayed(&out, st, r); err != nil {
				return DeductResult{}, unavailable("deduct "+idemKey+": read the first answer", err)
			}
			continue
		}
		us, err := parseUsed(r.used, len(st.counters))
		if err != nil {
			return DeductResult{}, unavailable("deduct "+idemKey, err)
		}
		for j := range st.counters {
			v := st.counters[j].view()
			c := v.counter(st.identityType, st.identity, us[j])
			out.Counters = append(out.Counters, c)
			if w, ok := v.wouldExceed(c); ok {
				out.WouldExceed = append(out.WouldExceed, w)
				if first {
					s.metrics.wouldExceed(w.RuleID)
				}
			}
		}
	}
	return out, nil
}

// replayed adds to out the counters of a step that an earlier attempt took, from its record.
func replayed(out *DeductResult, st *step, r *stepResult) error {
	rs, err := parseRecord(r.record)
	if err != nil {
		return err
	}
	us, err := parseUsed(r.used, len(rs))
	if err != nil {
		return err
	}
	for j := range rs {
		w, err := ParseWindowID(rs[j].windowID)
		if err != nil {
			return err
		}
		v := counterView{dim: rs[j].dim, window: w, kind: rs[j].kind, ms: rs[j].ms, limit: rs[j].limit,
			shadowRule: rs[j].shadowRule, shadowLimit: rs[j].shadowLimit}
		c := v.counter(st.identityType, st.identity, us[j])
		out.Counters = append(out.Counters, c)
		if w, ok := v.wouldExceed(c); ok {
			out.WouldExceed = append(out.WouldExceed, w)
		}
	}
	return nil
}

// DeductScriptCall returns the keys and arguments of the quota_deduct.lua call that a deduct
// sends for its first identity (in the service's order), with "now" from the clock. It changes
// nothing. It is exported for the benchmarks of this package and of the API, which drive the
// script without this layer (redis-benchmark sending testkit.EvalSHA's words) to measure it
// beside the service; placeholders such as __rand_int__ may be put in idemKey.
//
// Errors: ErrInvalid.
func (s *Service) DeductScriptCall(bizID int64, idemKey string, items []Item) (keys []string, args []any, err error) {
	if err := validateDeduct(bizID, idemKey, items); err != nil {
		return nil, nil, err
	}
	now := s.cfg.Clock.Now()
	steps, err := plan(s.cfg.KeyPrefix, bizID, items, s.rules.current(), now)
	if err != nil {
		return nil, nil, err
	}
	keys, args = s.scripts.deductCall(&steps[0], idemKey, "a-"+idemKey, now.UnixMilli())
	return keys, args, nil
}
