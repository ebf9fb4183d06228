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
// dimension and window share one counter; the lower limit holds.
type Rule struct {
	ID           int64
	BizID        int64
	IdentityType string
	Dimension    string
	Limit        int64
	Window       Window
	CreatedAt    time.Time
	UpdatedAt    time.Time

	limitArg any // Limit boxed for script arguments, set by newRuleSet
}

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
