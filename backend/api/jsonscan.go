package api

import (
	"bytes"
	"errors"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// A hand-written JSON scanner for the one hot body, a quota deduct (quota_decode.go): no
// reflection, and no allocation but the strings it returns and the slices. Measured on the
// whole request path it takes about a tenth off the process's CPU per deduct against
// encoding/json (docs/BENCHMARKS.md); every other body is read by decodeJSON.
//
// It accepts exactly what decodeJSON (encoding/json, strict) accepts into the same structs and
// yields the same values (FuzzDecodeDeductMatchesEncodingJSON checks both): keys match
// case-insensitively, a repeated key decodes again into what is there, null leaves a field as
// it is (nil for slices and pointers), and bad surrogate escapes become U+FFFD. Its refusals
// use jsonProblem's words, but a syntax error names no byte offset. The caller (readDeduct)
// has checked that the body is UTF-8.

var (
	errSyntax  = errors.New("the body is not valid JSON")
	errEOF     = errors.New("the body is not valid JSON (it ends early)")
	errTrailer = errors.New(trailerProblem)
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
			for s.i < len(s.b) && bytes.IndexByte([]byte("0123456789.eE+-"), s.b[s.i]) >= 0 {
				s.i++
			}
			return notInteger(field, s.b[start:s.i])
		}
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	if err != nil {
		return notInteger(field, s.b[start:s.i])
	}
	*dst = n
	return nil
}

// notInteger says that a number cannot be read as an integer, as jsonProblem says it.
func notInteger(field string, number []byte) error {
	return errors.New(field + " must not be number " + string(number) + "; expected an integer")
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
	return errors.New(field + " must not be " + got + "; expected " + want)
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

func unknown(key []byte) error { return errors.New("unknown field " + strconv.Quote(string(key))) }
