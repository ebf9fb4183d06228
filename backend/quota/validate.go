package quota

import (
	"strconv"
	"strings"

	"vouchergate/shared/wire"
)

// The bounds and formats of rules and requests. Each check names the field that breaks one,
// as an ErrInvalid, in words an API client can act on.

// validateDeduct checks a deduct's bounds and formats, naming the first field that breaks one.
func validateDeduct(bizID int64, idemKey string, items []Item) error {
	if bizID <= 0 {
		return invalid("bizId must be a positive integer")
	}
	if err := checkID("idemKey", idemKey, wire.MaxIdemKeyLen); err != nil {
		return err
	}
	if len(items) == 0 {
		return invalid("items must hold at least one item")
	}
	if len(items) > wire.MaxQuotaItems {
		return invalid("items holds %d items; at most %d", len(items), wire.MaxQuotaItems)
	}
	for i := range items {
		if err := validateItem(i, &items[i]); err != nil {
			return err
		}
	}
	return nil
}

func validateItem(i int, it *Item) error {
	// field names are built only on the error path: this runs on every deduct
	field := func(name string) string { return "items[" + strconv.Itoa(i) + "]." + name }
	if checkIdentityType("identityType", it.IdentityType) != nil {
		return checkIdentityType(field("identityType"), it.IdentityType)
	}
	if checkID("identity", it.Identity, wire.MaxIdentityLen) != nil {
		return checkID(field("identity"), it.Identity, wire.MaxIdentityLen)
	}
	if len(it.Dimensions) == 0 {
		return invalid("%s must hold at least one dimension, e.g. \"ITEM:1001\"", field("dimensions"))
	}
	if len(it.Dimensions) > wire.MaxItemDimensions {
		return invalid("%s holds %d dimensions; at most %d", field("dimensions"), len(it.Dimensions), wire.MaxItemDimensions)
	}
	for j, d := range it.Dimensions {
		if checkDimension("dimension", d, false) != nil {
			return checkDimension(field("dimensions["+strconv.Itoa(j)+"]"), d, false)
		}
		for _, e := range it.Dimensions[:j] {
			if e == d {
				return invalid("%s names %q twice", field("dimensions"), clip(d))
			}
		}
	}
	if it.Amount < 1 || it.Amount > wire.MaxQuotaAmount {
		return invalid("%s must be from 1 to %d", field("amount"), wire.MaxQuotaAmount)
	}
	return nil
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

// checkText refuses what would make a key name ambiguous or unreadable: what wire.CheckText
// refuses (bytes that are not UTF-8, U+FFFD, control characters), and braces (a brace would
// move the Redis Cluster hash tag).
func checkText(field, s string) error {
	if err := wire.CheckText(field, s); err != nil {
		return invalid("%v", err)
	}
	if i := strings.IndexAny(s, "{}"); i >= 0 {
		return invalid("%s contains %q; braces are not allowed", field, s[i])
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
