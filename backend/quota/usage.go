package quota

import (
	"context"
	"strings"

	"vouchergate/shared/wire"
)

// Usage returns the counters the rules imply for an identity: for an item with the given
// dimensions, or, with none given, those of every rule that names its dimension (exact or "*";
// a wildcard rule such as "ITEM:*" needs a dimension to name a counter).
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
	nowMs := now.UnixMilli()
	st := step{identityType: identityType, identity: identity,
		base: identityBase(s.cfg.KeyPrefix, bizID, identityType, identity)}
	for _, r := range s.rules.current().forType(bizID, identityType) {
		switch {
		case r.Dimension == "*":
			st.add(0, "*", r, 0, now, nowMs)
		case len(dimensions) == 0:
			if !strings.HasSuffix(r.Dimension, ":*") {
				st.add(0, r.Dimension, r, 0, now, nowMs)
			}
		default:
			for _, d := range dimensions {
				if counterDim, ok := r.matches(d); ok {
					st.add(0, counterDim, r, 0, now, nowMs)
				}
			}
		}
	}
	us, err := s.scripts.usage(ctx, &st, nowMs)
	if err != nil {
		s.metrics.unavailable.Add(1)
		return nil, unavailable("quota usage", err)
	}
	out := make([]Counter, len(st.counters))
	for i := range st.counters {
		c := &st.counters[i]
		out[i] = Counter{IdentityType: identityType, Identity: identity, Dimension: c.dimension,
			Window: *c.window, Used: us[i].used, Limit: c.limit,
			ResetsAt: resetsAt(c.kind, c.msField(), us[i], c.window.Location())}
	}
	return out, nil
}
