package quota

import (
	"strings"
	"time"
	"unicode/utf8"

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

func checkIdentityType(field, s string) error {
	if s == "" {
		return invalid("%s is required", field)
	}
	if len(s) > wire.MaxIdentityTypeLen || !isName(s) {
		return invalid("%s %q must match ^[A-Z0-9_]{1,%d}$", field, clip(s), wire.MaxIdentityTypeLen)
	}
	return nil
}

// checkDimension checks "NAME:VALUE" with NAME ^[A-Z0-9_]{1,32}$; a rule may also use "*" and
// "NAME:*", an item may not.
func checkDimension(field, d string, rule bool) error {
	if d == "" {
		return invalid("%s is required", field)
	}
	if len(d) > wire.MaxDimensionLen {
		return invalid("%s is %d bytes; at most %d", field, len(d), wire.MaxDimensionLen)
	}
	if d == "*" {
		if rule {
			return nil
		}
		return invalid("%s \"*\" is only for rules; name the item, e.g. \"ITEM:1001\"", field)
	}
	name, value, ok := strings.Cut(d, ":")
	if !ok || name == "" || len(name) > wire.MaxIdentityTypeLen || !isName(name) || value == "" {
		return invalid("%s %q must be NAME:VALUE with NAME ^[A-Z0-9_]{1,32}$, e.g. \"ITEM:1001\"", field, clip(d))
	}
	if value == "*" && !rule {
		return invalid("%s %q: \"*\" is only for rules; name the item", field, clip(d))
	}
	return checkText(field, value)
}

// checkText refuses what would make a key name ambiguous or unreadable: invalid UTF-8, control
// characters and braces (a brace would move the Redis Cluster hash tag).
func checkText(field, s string) error {
	if !utf8.ValidString(s) {
		return invalid("%s is not valid UTF-8", field)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '{' || r == '}' {
			return invalid("%s contains %q; control characters and braces are not allowed", field, r)
		}
	}
	return nil
}

// checkID checks an identity or idemKey: 1 to max bytes of text.
func checkID(field, s string, max int) error {
	if s == "" {
		return invalid("%s is required", field)
	}
	if len(s) > max {
		return invalid("%s is %d bytes; at most %d", field, len(s), max)
	}
	return checkText(field, s)
}

func isName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// ruleSet is an immutable snapshot of every rule, indexed for the deduct path.
type ruleSet struct {
	byType map[typeKey][]*Rule
	all    []*Rule
}

type typeKey struct {
	biz int64
	typ string
}

func newRuleSet(rules []Rule) *ruleSet {
	s := &ruleSet{byType: make(map[typeKey][]*Rule), all: make([]*Rule, len(rules))}
	for i := range rules {
		r := &rules[i]
		r.limitArg = r.Limit
		s.all[i] = r
		k := typeKey{r.BizID, r.IdentityType}
		s.byType[k] = append(s.byType[k], r)
	}
	return s
}

func (s *ruleSet) forType(biz int64, typ string) []*Rule { return s.byType[typeKey{biz, typ}] }
