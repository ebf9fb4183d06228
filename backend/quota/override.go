package quota

import (
	"context"
	"errors"
	"fmt"
	"time"

	"vouchergate/shared/wire"
)

// Override replaces one rule's limit for one identity: a VIP allowed 10 a day where the rule
// says 3, a fraudster blocked with Limit 0. It names its rule as a rule is named (bizId,
// identityType, dimension, window) and applies to every counter that rule implies for the
// identity, until ExpiresAt (nil: until deleted). A counter that another rule of the same
// dimension and window shares still holds the lower of the two limits. It goes with its rule:
// deleting the rule deletes its overrides; posting the rule again keeps them.
type Override struct {
	ID           int64
	RuleID       int64
	BizID        int64
	IdentityType string
	Identity     string
	Dimension    string
	Window       Window
	Limit        int64
	ExpiresAt    *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time

	limitArg any // Limit boxed for script arguments, set by newRuleSet
}

// MaxOverridesPerRule bounds the overrides of one rule, which every backend holds in memory.
const MaxOverridesPerRule = 10000

// Validate reports the first field of o that cannot be stored, as an ErrInvalid; now is when
// it is asked (ExpiresAt must be later).
func (o Override) Validate(now time.Time) error {
	if o.BizID <= 0 {
		return invalid("bizId must be a positive integer")
	}
	if err := checkIdentityType("identityType", o.IdentityType); err != nil {
		return err
	}
	if err := checkID("identity", o.Identity, wire.MaxIdentityLen); err != nil {
		return err
	}
	if err := checkDimension("dimension", o.Dimension, true); err != nil {
		return err
	}
	if o.Limit < 0 || o.Limit > wire.MaxQuotaLimit {
		return invalid("limit must be from 0 (blocked) to %d", int64(wire.MaxQuotaLimit))
	}
	if o.Window.id == "" {
		return invalid("window is required: the window of the rule to override")
	}
	if o.ExpiresAt != nil && !o.ExpiresAt.After(now) {
		return invalid("expiresAt %s is not in the future", o.ExpiresAt.Format(time.RFC3339))
	}
	return nil
}

// active tells whether o applies at now.
func (o *Override) active(now time.Time) bool { return o.ExpiresAt == nil || now.Before(*o.ExpiresAt) }

// PutOverride stores o: a new override, or a new limit and expiry for the override the rule
// already has for the identity. created tells which. This backend applies it at once; the
// others are told over NATS, as for rules.
//
// Errors: ErrInvalid, ErrNoRuleToOverride, ErrTooManyOverrides, ErrUnavailable.
func (s *Service) PutOverride(ctx context.Context, o Override) (saved Override, created bool, err error) {
	if err := o.Validate(s.cfg.Clock.Now()); err != nil {
		return Override{}, false, err
	}
	saved, created, err = s.store.putOverride(ctx, o)
	if err != nil {
		if errors.Is(err, ErrNoRuleToOverride) || errors.Is(err, ErrTooManyOverrides) {
			return Override{}, false, err
		}
		return Override{}, false, unavailable("put quota override", err)
	}
	s.changed(ctx)
	return saved, created, nil
}

// Overrides returns the overrides in force, by id, optionally of one bizId (0: every one), one
// identityType and one identity ("": every one), from PostgreSQL.
//
// Errors: ErrUnavailable.
func (s *Service) Overrides(ctx context.Context, bizID int64, identityType, identity string) ([]Override, error) {
	os, err := s.store.overrides(ctx, bizID, identityType, identity, s.cfg.Clock.Now())
	if err != nil {
		return nil, unavailable("list quota overrides", err)
	}
	if os == nil {
		os = []Override{}
	}
	return os, nil
}

// OverrideByID returns the override with id, from PostgreSQL, expired or not.
//
// Errors: ErrOverrideNotFound, ErrUnavailable.
func (s *Service) OverrideByID(ctx context.Context, id int64) (Override, error) {
	o, err := s.store.override(ctx, id)
	if err != nil && !errors.Is(err, ErrOverrideNotFound) {
		return Override{}, unavailable(fmt.Sprintf("read quota override %d", id), err)
	}
	return o, err
}

// DeleteOverride removes the override with id and returns it: the rule's own limit applies to
// the identity again, on every backend within the rule cache's NATS path.
//
// Errors: ErrOverrideNotFound, ErrUnavailable.
func (s *Service) DeleteOverride(ctx context.Context, id int64) (Override, error) {
	o, err := s.store.deleteOverride(ctx, id)
	if err != nil {
		if errors.Is(err, ErrOverrideNotFound) {
			return Override{}, err
		}
		return Override{}, unavailable(fmt.Sprintf("delete quota override %d", id), err)
	}
	s.changed(ctx)
	return o, nil
}
