package wire

import (
	"fmt"
	"unicode/utf8"
)

// Bounds on identifiers, so that no key, row or event grows large.
const (
	MaxCodeLen     = 32
	MaxOrderIDLen  = 64
	MaxCustomerLen = 64
)

// ValidCode reports whether s is a voucher code: ^[A-Z0-9_-]{1,32}$.
func ValidCode(s string) bool {
	if len(s) == 0 || len(s) > MaxCodeLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// CheckID reports why s cannot be an orderId or customerId (named what), or nil:
// 1 to max bytes of UTF-8 with no control characters and no '/', so it fits a URL path segment.
func CheckID(what, s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is required", what)
	case len(s) > max:
		return fmt.Errorf("%s is %d bytes; at most %d", what, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not valid UTF-8", what)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '/' {
			return fmt.Errorf("%s contains %q; control characters and '/' are not allowed", what, r)
		}
	}
	return nil
}
