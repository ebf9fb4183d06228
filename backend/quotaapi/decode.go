package quotaapi

import (
	"bytes"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"vouchergate/shared/wire"
)

// A hand-written decoder for the two hot bodies, deduct and rollback: no reflection, and no
// allocation but the strings it returns and the items slice. It accepts exactly what
// encoding/json with DisallowUnknownFields accepts into the same structs, and yields the same
// values (FuzzDecodeDeductMatchesEncodingJSON checks both): keys match case-insensitively, a
// repeated key decodes again into what is there, null leaves a field as it is (nil for slices
// and pointers), and bad surrogate escapes become U+FFFD. The caller has checked that the body
// is UTF-8.

// decodeError says what is wrong, in the words of jsonProblem. bound marks a list cut short
// at a wire bound (more items or dimensions than allowed), where encoding/json would go on.
type decodeError struct {
	msg   string
	bound bool
}

func (e *decodeError) Error() string { return e.msg }

func errAt(msg string) error { return &decodeError{msg: msg} }

func errBound(msg string) error { return &decodeError{msg: msg, bound: true} }

var (
	errSyntax  = errAt("the body is not valid JSON")
	errEOF     = errAt("the body is not valid JSON (it ends early)")
	errTrailer = errAt("data after the JSON object")
)

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next byte after white space, or 0 at the end (or at a NUL byte: bad tells
// which).
func (s *scanner) peek() byte {
	s.ws()
	if s.i == len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *scanner) eat(c byte) error {
	switch s.peek() {
	case c:
		s.i++
		return nil
	case 0:
		return s.bad()
	}
	return errSyntax
}

// null consumes a null literal if one is next.
func (s *scanner) null() (bool, error) {
	if s.peek() != 'n' {
		return false, nil
	}
	if !bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		if len(s.b)-s.i < 4 && bytes.HasPrefix([]byte("null"), s.b[s.i:]) {
			return false, errEOF
		}
		return false, errSyntax
	}
	s.i += 4
	return true, nil
}

// object calls field for each key of an object, positioned at its value.
func (s *scanner) object(field func(key []byte) error) error {
	if err := s.eat('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if c := s.peek(); c != '"' {
			if c == 0 {
				return s.bad()
			}
			return errSyntax
		}
		key, err := s.rawString()
		if err != nil {
			return err
		}
		if err := s.eat(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		switch c := s.peek(); c {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		case 0:
			return s.bad()
		default:
			return errSyntax
		}
	}
}

// array calls elem for each element of an array, positioned at it.
func (s *scanner) array(elem func() error) error {
	if err := s.eat('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch c := s.peek(); c {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		case 0:
			return s.bad()
		default:
			return errSyntax
		}
	}
}

// rawString reads a string and returns its bytes, unescaped; they alias the body when it
// holds no escape, else a new buffer.
func (s *scanner) rawString() ([]byte, error) {
	if err := s.eat('"'); err != nil {
		return nil, err
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], nil
		case c == '\\':
			return s.escaped(start)
		case c < 0x20:
			return nil, errSyntax
		}
		s.i++
	}
	return nil, errEOF
}

// escaped finishes a string that holds escapes, from its start.
func (s *scanner) escaped(start int) ([]byte, error) {
	out := append(make([]byte, 0, s.i-start+16), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return out, nil
		case c < 0x20:
			return nil, errSyntax
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			return nil, errEOF
		}
		switch e := s.b[s.i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := s.u4(s.i)
			if !ok {
				if len(s.b)-s.i < 6 {
					return nil, errEOF
				}
				return nil, errSyntax
			}
			s.i += 6
			if utf16.IsSurrogate(r) {
				// as encoding/json: a valid pair is one rune, anything else U+FFFD
				if r2, ok := s.u4(s.i); ok {
					if d := utf16.DecodeRune(r, r2); d != unicode.ReplacementChar {
						s.i += 6
						out = utf8.AppendRune(out, d)
						continue
					}
				}
				r = unicode.ReplacementChar
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return nil, errSyntax
		}
		s.i += 2
	}
	return nil, errEOF
}

// u4 reads \uXXXX at i.
func (s *scanner) u4(i int) (rune, bool) {
	if i+6 > len(s.b) || s.b[i] != '\\' || s.b[i+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range s.b[i+2 : i+6] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}

// str decodes a string or null into dst (null leaves it).
func (s *scanner) str(field string, dst *string) error {
	if ok, err := s.null(); ok || err != nil {
		return err
	}
	if s.peek() != '"' {
		return s.mistyped(field, "a string")
	}
	b, err := s.rawString()
	if err != nil {
		return err
	}
	*dst = string(b)
	return nil
}

// int decodes an integer or null into dst (null leaves it). Fractions, exponents and values
// outside int64 are refused, as encoding/json refuses them for an int64.
func (s *scanner) int(field string, dst *int64) error {
	if ok, err := s.null(); ok || err != nil {
		return err
	}
	c := s.peek()
	if c != '-' && (c < '0' || c > '9') {
		return s.mistyped(field, "an integer")
	}
	start := s.i
	if c == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	switch {
	case s.i == digits:
		if s.i == len(s.b) {
			return errEOF
		}
		return errSyntax
	case s.b[digits] == '0' && s.i-digits > 1:
		return errSyntax
	}
	if s.i < len(s.b) {
		if c := s.b[s.i]; c == '.' || c == 'e' || c == 'E' {
			return errAt(field + " must be an integer")
		}
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	if err != nil {
		return errAt(field + " is out of range")
	}
	*dst = n
	return nil
}

// mistyped names the field a value of the wrong kind was given for.
func (s *scanner) mistyped(field, want string) error {
	var got string
	switch s.peek() {
	case '"':
		got = "string"
	case '{':
		got = "object"
	case '[':
		got = "array"
	case 't', 'f':
		got = "bool"
	case 0:
		return s.bad()
	default:
		if c := s.b[s.i]; c == '-' || c >= '0' && c <= '9' {
			got = "number"
		} else {
			return errSyntax
		}
	}
	return errAt(field + " must not be " + got + "; expected " + want)
}

// end checks that only white space follows.
func (s *scanner) end() error {
	if s.ws(); s.i < len(s.b) {
		return errTrailer
	}
	return nil
}

// bad is the error for what peek returned 0 for: the end of the body, or a NUL byte.
func (s *scanner) bad() error {
	if s.i >= len(s.b) {
		return errEOF
	}
	return errSyntax
}

func unknown(key []byte) error { return errAt("unknown field " + strconv.Quote(string(key))) }

// decodeDeduct parses a POST /quotas/deduct body into req.
func decodeDeduct(body []byte, req *wire.QuotaDeductRequest) error {
	s := scanner{b: body}
	if ok, err := s.null(); err != nil || ok {
		if err == nil {
			err = s.end()
		}
		return err
	}
	if c := s.peek(); c != '{' {
		if c == 0 {
			return s.bad()
		}
		if c == '[' || c == '"' || c == 't' || c == 'f' || c == '-' || c >= '0' && c <= '9' {
			return errAt("the body must be a JSON object")
		}
		return errSyntax
	}
	err := s.object(func(key []byte) error {
		switch {
		case bytes.EqualFold(key, []byte("bizId")):
			return s.int("bizId", &req.BizID)
		case bytes.EqualFold(key, []byte("idemKey")):
			return s.str("idemKey", &req.IdemKey)
		case bytes.EqualFold(key, []byte("items")):
			return s.items(&req.Items)
		}
		return unknown(key)
	})
	if err != nil {
		return err
	}
	return s.end()
}

// items decodes the items array into *dst, reusing its elements as encoding/json does.
func (s *scanner) items(dst *[]wire.QuotaItem) error {
	if ok, err := s.null(); ok || err != nil {
		if ok {
			*dst = nil
		}
		return err
	}
	if s.peek() != '[' {
		return s.mistyped("items", "an array of items")
	}
	items := (*dst)[:0]
	if items == nil {
		items = make([]wire.QuotaItem, 0, 1)
	}
	err := s.array(func() error {
		if len(items) < cap(items) {
			items = items[:len(items)+1]
		} else {
			items = append(items, wire.QuotaItem{})
		}
		if len(items) > wire.MaxQuotaItems {
			return errBound("items holds more than " + strconv.Itoa(wire.MaxQuotaItems) + " items; at most " + strconv.Itoa(wire.MaxQuotaItems))
		}
		return s.item(&items[len(items)-1])
	})
	*dst = items
	return err
}

func (s *scanner) item(it *wire.QuotaItem) error {
	if ok, err := s.null(); ok || err != nil {
		return err
	}
	if s.peek() != '{' {
		return s.mistyped("items", "an object")
	}
	return s.object(func(key []byte) error {
		switch {
		case bytes.EqualFold(key, []byte("identityType")):
			return s.str("items.identityType", &it.IdentityType)
		case bytes.EqualFold(key, []byte("identity")):
			return s.str("items.identity", &it.Identity)
		case bytes.EqualFold(key, []byte("dimensions")):
			return s.strings("items.dimensions", &it.Dimensions)
		case bytes.EqualFold(key, []byte("amount")):
			if ok, err := s.null(); ok || err != nil {
				if ok {
					it.Amount = nil
				}
				return err
			}
			var n int64
			if it.Amount != nil {
				n = *it.Amount
			}
			if err := s.int("items.amount", &n); err != nil {
				return err
			}
			it.Amount = &n
			return nil
		}
		return unknown(key)
	})
}

// strings decodes an array of strings into *dst, reusing its elements as encoding/json does.
func (s *scanner) strings(field string, dst *[]string) error {
	if ok, err := s.null(); ok || err != nil {
		if ok {
			*dst = nil
		}
		return err
	}
	if s.peek() != '[' {
		return s.mistyped(field, "an array of strings")
	}
	list := (*dst)[:0]
	if list == nil {
		list = make([]string, 0, 2)
	}
	err := s.array(func() error {
		if len(list) < cap(list) {
			list = list[:len(list)+1]
		} else {
			list = append(list, "")
		}
		if len(list) > wire.MaxItemDimensions {
			return errBound(field + " holds more than " + strconv.Itoa(wire.MaxItemDimensions) + " dimensions; at most " + strconv.Itoa(wire.MaxItemDimensions))
		}
		return s.str(field, &list[len(list)-1])
	})
	*dst = list
	return err
}

// decodeRollback parses a POST /quotas/rollback body into req.
func decodeRollback(body []byte, req *wire.QuotaRollbackRequest) error {
	s := scanner{b: body}
	if ok, err := s.null(); err != nil || ok {
		if err == nil {
			err = s.end()
		}
		return err
	}
	if c := s.peek(); c != '{' {
		if c == 0 {
			return s.bad()
		}
		return errAt("the body must be a JSON object")
	}
	err := s.object(func(key []byte) error {
		switch {
		case bytes.EqualFold(key, []byte("bizId")):
			return s.int("bizId", &req.BizID)
		case bytes.EqualFold(key, []byte("idemKey")):
			return s.str("idemKey", &req.IdemKey)
		}
		return unknown(key)
	})
	if err != nil {
		return err
	}
	return s.end()
}
