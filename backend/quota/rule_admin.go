package quota

import (
	"context"
	"errors"
	"fmt"
)

// PutRule stores r: a new rule, or a new limit for the rule with the same bizId, identityType,
// dimension and window, whose counters go on counting. created tells which. This backend uses
// it at once; the others are told over NATS and see it within seconds.
//
// Errors: ErrInvalid, ErrTooManyRules, ErrUnavailable.
func (s *Service) PutRule(ctx context.Context, r Rule) (saved Rule, created bool, err error) {
	if err := r.Validate(); err != nil {
		return Rule{}, false, err
	}
	saved, created, err = s.store.put(ctx, r)
	if err != nil {
		if errors.Is(err, ErrTooManyRules) {
			return Rule{}, false, err
		}
		return Rule{}, false, unavailable("put quota rule", err)
	}
	s.changed(ctx)
	return saved, created, nil
}

// DeleteRule removes the rule with id and returns it. Its counters are left to expire.
//
// Errors: ErrRuleNotFound, ErrUnavailable.
func (s *Service) DeleteRule(ctx context.Context, id int64) (Rule, error) {
	r, err := s.store.delete(ctx, id)
	if err != nil {
		if errors.Is(err, ErrRuleNotFound) {
			return Rule{}, err
		}
		return Rule{}, unavailable(fmt.Sprintf("delete quota rule %d", id), err)
	}
	s.changed(ctx)
	return r, nil
}

// Rule returns the rule with id, from PostgreSQL.
//
// Errors: ErrRuleNotFound, ErrUnavailable.
func (s *Service) Rule(ctx context.Context, id int64) (Rule, error) {
	r, err := s.store.get(ctx, id)
	if err != nil && !errors.Is(err, ErrRuleNotFound) {
		return Rule{}, unavailable(fmt.Sprintf("read quota rule %d", id), err)
	}
	return r, err
}

// Rules returns the rules of bizID (every rule if bizID is 0), from PostgreSQL.
//
// Errors: ErrUnavailable.
func (s *Service) Rules(ctx context.Context, bizID int64) ([]Rule, error) {
	rs, err := s.store.list(ctx, bizID)
	if err != nil {
		return nil, unavailable("list quota rules", err)
	}
	if rs == nil {
		rs = []Rule{}
	}
	return rs, nil
}

// changed reloads this backend's rules and tells the others.
func (s *Service) changed(ctx context.Context) {
	if err := s.rules.reload(ctx); err != nil {
		s.cfg.Log.Warn("quota: reload rules after a change; the refresh will", "err", err)
		s.rules.poke()
	}
	if s.cfg.NATS != nil {
		if err := s.cfg.NATS.Publish(s.subject, nil); err != nil {
			s.cfg.Log.Warn("quota: announce a rule change; others see it at their next refresh", "err", err)
		}
	}
}
