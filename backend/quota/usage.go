package quota

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/shared/wire"
)

// maxUsageIndexed bounds the counters of wildcard rules that one usage read lists: those that
// count longest.
const maxUsageIndexed = 256

// Usage returns the counters the rules imply for an identity in their current windows, each
// with the identity's limit (its override's where one is in force): for an item with the given
// dimensions or, with none given, every counter of the identity: those of the rules that name
// their dimension (exact or "*"), and those of wildcard rules (such as "ITEM:*") that a deduct
// has counted in the current window (at most maxUsageIndexed).
//
// Errors: ErrInvalid, ErrUnavailable.
func (s *Service) Usage(ctx context.Context, bizID int64, identityType, identity string, dimensions []string) ([]Counter, error) {
	if bizID <= 0 {
		return nil, invalid("bizId must be a positive integer")
	}
	if err := checkIdentityType("identityType", identityType); err != nil {
		return nil, err
	}
	if err := checkID("identity", identity, wire.MaxIdentityLen); err != nil {
		return nil, err
	}
	if len(dimensions) > wire.MaxItemDimensions {
		return nil, invalid("dimension is given %d times; at most %d", len(dimensions), wire.MaxItemDimensions)
	}
	for _, d := range dimensions {
		if err := checkDimension("dimension", d, false); err != nil {
			return nil, err
		}
	}
	now := s.cfg.Clock.Now()
	st, named, err := s.identityCounters(ctx, bizID, identityType, identity, dimensions, now, maxUsageIndexed)
	if err != nil {
		s.metrics.unavailable.Add(1)
		return nil, unavailable("quota usage", err)
	}
	us, err := s.scripts.usage(ctx, &st, now.UnixMilli())
	if err != nil {
		s.metrics.unavailable.Add(1)
		return nil, unavailable("quota usage", err)
	}
	out := make([]Counter, 0, len(st.counters))
	for i := range st.counters {
		if i >= named && us[i].used == 0 {
			continue // a wildcard rule's counter of an earlier period or emptied since
		}
		v := st.counters[i].view()
		out = append(out, v.counter(identityType, identity, us[i]))
	}
	return out, nil
}

// identityCounters is a step holding the counters the rules imply for an identity at now, each
// with the identity's limit: for an item of dimensions or, with none, every counter of the
// identity (see Usage), of wildcard rules at most indexed (0: all). The counters from named on
// are wildcard rules' found in the index.
func (s *Service) identityCounters(ctx context.Context, bizID int64, identityType, identity string, dimensions []string, now time.Time,
	indexed int64) (step, int, error) {
	nowMs := now.UnixMilli()
	set := s.rules.current()
	st := step{identityType: identityType, identity: identity,
		base: identityBase(s.cfg.KeyPrefix, bizID, identityType, identity)}
	var wildcards []*Rule
	for _, r := range set.forType(bizID, identityType) {
		limit, arg := set.limitFor(r, identity, now)
		switch {
		case r.Dimension == "*":
			st.add(0, "*", r, limit, arg, 0, now, nowMs)
		case len(dimensions) == 0:
			if strings.HasSuffix(r.Dimension, ":*") {
				wildcards = append(wildcards, r)
			} else {
				st.add(0, r.Dimension, r, limit, arg, 0, now, nowMs)
			}
		default:
			for _, d := range dimensions {
				if counterDim, ok := r.matches(d); ok {
					st.add(0, counterDim, r, limit, arg, 0, now, nowMs)
				}
			}
		}
	}
	named := len(st.counters)
	if len(wildcards) > 0 {
		if err := s.addIndexed(ctx, &st, set, wildcards, now, indexed); err != nil {
			return step{}, 0, err
		}
	}
	return st, named, nil
}

// addIndexed adds to st the counters of wildcard rules that the identity's index names in the
// rules' current windows: the most (0: all) that count longest.
func (s *Service) addIndexed(ctx context.Context, st *step, set *ruleSet, wildcards []*Rule, now time.Time, most int64) error {
	names, err := s.scripts.rdb.ZRevRangeByScore(ctx, indexKey(st.base), &redis.ZRangeBy{
		Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf", Count: most}).Result()
	if err != nil {
		return err
	}
	nowMs := now.UnixMilli()
	for _, name := range names {
		// "c:<seg>:<dim>" or "z:<seg>:<dim>": the counter key after the identity's part
		if len(name) < 3 || name[1] != ':' {
			continue
		}
		seg, dim, ok := strings.Cut(name[2:], ":")
		if !ok {
			continue
		}
		for _, r := range wildcards {
			if _, ok := r.matches(dim); !ok || currentSeg(&r.Window, now) != seg || (name[0] == 'z') != (r.Window.Type == Rolling) {
				continue
			}
			limit, arg := set.limitFor(r, st.identity, now)
			st.add(0, dim, r, limit, arg, 0, now, nowMs)
		}
	}
	return nil
}

// currentSeg is the key part of w's counters at now; "" for a fixed window that is not open.
func currentSeg(w *Window, now time.Time) string {
	if w.Type == Rolling {
		return w.id
	}
	if p, ok := w.periodAt(now); ok {
		return p.seg
	}
	return ""
}
