package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
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

// CanonicalCode is code as vouchers are stored and answered: codes are case-insensitive, so
// ASCII letters are upper-cased ("flash100" names FLASH100). Only ASCII changes: a non-ASCII
// letter stays as it is, and ValidCode then refuses it (strings.ToUpper would turn "ſ" into
// "S" and name a voucher the client did not type).
func CanonicalCode(code string) string {
	for i := 0; i < len(code); i++ {
		if c := code[i]; c >= 'a' && c <= 'z' {
			b := []byte(code)
			UpperCode(b[i:])
			return string(b)
		}
	}
	return code
}

// UpperCode upper-cases the ASCII letters of code in place (CanonicalCode without allocating).
func UpperCode(code []byte) {
	for i, c := range code {
		if c >= 'a' && c <= 'z' {
			code[i] = c - 'a' + 'A'
		}
	}
}

// MaxCustomerNumber is the largest numeric customerId: the seed stores customer_id as a
// signed 64-bit BIGINT.
const MaxCustomerNumber = math.MaxInt64

// customerIDForm is what a customerId may be, for error messages.
const customerIDForm = "expected a JSON integer from 0 to 9223372036854775807, or a string"

// CustomerID is a customerId as the wire carries it: a JSON integer from 0 to
// MaxCustomerNumber, as the seed's clients send it (customer_id BIGINT), or a string, for shops
// whose ids are not numbers. A number decodes to its decimal string, so 42 and "42" name the
// same customer; a string is taken as it is, so "042" is another customer than 42. It encodes
// as a string. null leaves it as it is, as encoding/json does for a string.
type CustomerID string

// UnmarshalJSON reads a JSON integer or string; fractions, exponents, signs and numbers beyond
// MaxCustomerNumber are refused with a message naming customerId and the expected form.
func (c *CustomerID) UnmarshalJSON(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("customerId is empty; %s", customerIDForm)
	}
	switch ch := b[0]; {
	case ch == '"':
		if s, ok := plainString(b); ok {
			*c = CustomerID(s)
			return nil
		}
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("customerId is not a valid JSON string: %v", err)
		}
		*c = CustomerID(s)
		return nil
	case ch == 'n' && string(b) == "null":
		return nil
	case ch == '-' || ch >= '0' && ch <= '9':
		s, err := customerNumber(b)
		if err != nil {
			return err
		}
		*c = CustomerID(s)
		return nil
	case ch == 't' || ch == 'f':
		return fmt.Errorf("customerId must not be %s; %s", b, customerIDForm)
	case ch == '{':
		return fmt.Errorf("customerId must not be an object; %s", customerIDForm)
	case ch == '[':
		return fmt.Errorf("customerId must not be an array; %s", customerIDForm)
	}
	return fmt.Errorf("customerId is not valid JSON; %s", customerIDForm)
}

// customerNumber returns the canonical decimal string of b, a JSON number, or why it cannot be
// a customerId. JSON itself refuses leading zeros and '+', so digits alone are canonical.
func customerNumber(b []byte) (string, error) {
	shown := string(b)
	if len(shown) > 32 {
		shown = shown[:32] + "..."
	}
	switch {
	case b[0] == '-':
		return "", fmt.Errorf("customerId %s has a minus sign; %s", shown, customerIDForm)
	case bytes.IndexByte(b, '.') >= 0:
		return "", fmt.Errorf("customerId %s is not a whole number; %s", shown, customerIDForm)
	case bytes.IndexAny(b, "eE") >= 0:
		return "", fmt.Errorf("customerId %s has an exponent; %s", shown, customerIDForm)
	}
	for _, d := range b {
		if d < '0' || d > '9' {
			return "", fmt.Errorf("customerId %s is not a JSON number; %s", shown, customerIDForm)
		}
	}
	if len(b) > 1 && b[0] == '0' {
		return "", fmt.Errorf("customerId %s has a leading zero; %s", shown, customerIDForm)
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil || n > MaxCustomerNumber {
		return "", fmt.Errorf("customerId %s is beyond a signed 64-bit integer; %s", shown, customerIDForm)
	}
	return strconv.FormatUint(n, 10), nil
}

// plainString returns the content of b, a JSON string, when it holds no escapes, no control
// characters and only valid UTF-8: then encoding/json would return exactly those bytes.
func plainString(b []byte) (string, bool) {
	if len(b) < 2 || b[len(b)-1] != '"' {
		return "", false
	}
	in := b[1 : len(b)-1]
	for _, ch := range in {
		if ch < 0x20 || ch == '"' || ch == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}
