package quota

import (
	"strings"
	"time"

	"vouchergate/shared/wire"
)

// Rule says: for business line BizID and identity type IdentityType, items of Dimension may be
// bought at most Limit times (amounts summed) per Window.
//
// Dimension is exact ("ITEM:1001"), a wildcard value ("ITEM:*": each ITEM counted on its own),
// or "*" (every item of the identity counted together, once per item). Two rules with the same
// dimension and window share one counter; the lower limit holds. A SHADOW rule counts like any
// other but never refuses: a deduct it would refuse passes and lists it in WouldExceed.
type Rule struct {
	ID           int64
	BizID        int64
	IdentityType string
	Dimension    string
	Limit        int64
	Window       Window
	Mode         RuleMode // "" is Enforce
	CreatedAt    time.Time
	UpdatedAt    time.Time

	limitArg   any  // Limit boxed for script arguments, set by newRuleSet
	overridden bool // some identity has an override of this rule (newRuleSet)
}

// RuleMode says whether a rule refuses.
type RuleMode string

// Rule modes.
const (
	Enforce RuleMode = "ENFORCE" // refuses a deduct that has no room
	Shadow  RuleMode = "SHADOW"  // counts, never refuses: reports what it would refuse
)

// mode is r's mode, Enforce when unset.
func (r *Rule) mode() RuleMode {
	if r.Mode == "" {
		return Enforce
	}
	return r.Mode
}

// shadow tells whether r only reports.
func (r *Rule) shadow() bool { return r.Mode == Shadow }

// Validate reports the first field of r that cannot be stored, as an ErrInvalid.
func (r Rule) Validate() error {
	if r.BizID <= 0 {
		return invalid("bizId must be a positive integer")
	}
	if err := checkIdentityType("identityType", r.IdentityType); err != nil {
		return err
	}
	if err := checkDimension("dimension", r.Dimension, true); err != nil {
		return err
	}
	if r.Limit < 0 || r.Limit > wire.MaxQuotaLimit {
		return invalid("limit must be from 0 to %d", int64(wire.MaxQuotaLimit))
	}
	if r.Window.id == "" {
		return invalid("window is required")
	}
	if r.Mode != "" && r.Mode != Enforce && r.Mode != Shadow {
		return invalid("mode %q must be ENFORCE or SHADOW", clip(string(r.Mode)))
	}
	return nil
}

// matches reports the counter dimension that rule r implies for an item dimension d, if any.
func (r *Rule) matches(d string) (string, bool) {
	switch {
	case r.Dimension == d:
		return d, true
	case strings.HasSuffix(r.Dimension, ":*"):
		name := r.Dimension[:len(r.Dimension)-1] // "ITEM:"
		return d, len(d) > len(name) && strings.HasPrefix(d, name)
	}
	return "", false
}
