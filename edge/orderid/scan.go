package orderid

import (
	"unicode/utf16"
	"unicode/utf8"
)

// plain marks the bytes a string may hold as they are: not '"', '\\' or a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanner walks a JSON text, checking its syntax as it skips values.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) consume(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string and returns its raw content (between the quotes) and whether it holds
// escapes.
func (s *scanner) str() (raw []byte, escaped, ok bool) {
	if !s.consume('"') {
		return nil, false, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if plain[c] {
			s.i++
			continue
		}
		switch {
		case c == '"':
			raw = s.b[start:s.i]
			s.i++
			return raw, escaped, true
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.b) {
				return nil, false, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) || !hex4(s.b[s.i+2:s.i+6]) {
					return nil, false, false
				}
				s.i += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			s.i++
		}
	}
	return nil, false, false
}

// value skips one value of any kind.
func (s *scanner) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

func (s *scanner) object(depth int) bool {
	if depth > maxDepth {
		return false
	}
	s.i++ // '{'
	s.space()
	if s.consume('}') {
		return true
	}
	for {
		s.space()
		if _, _, ok := s.str(); !ok {
			return false
		}
		s.space()
		if !s.consume(':') {
			return false
		}
		s.space()
		if !s.value(depth) {
			return false
		}
		s.space()
		if s.consume(',') {
			continue
		}
		return s.consume('}')
	}
}

func (s *scanner) array(depth int) bool {
	if depth > maxDepth {
		return false
	}
	s.i++ // '['
	s.space()
	if s.consume(']') {
		return true
	}
	for {
		s.space()
		if !s.value(depth) {
			return false
		}
		s.space()
		if s.consume(',') {
			continue
		}
		return s.consume(']')
	}
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	s.consume('-')
	switch {
	case s.consume('0'):
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.consume('.') && s.digits() == 0 {
		return false
	}
	if s.consume('e') || s.consume('E') {
		if !s.consume('+') {
			s.consume('-')
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func hex4(b []byte) bool {
	for _, c := range b[:4] {
		if unhex(c) < 0 {
			return false
		}
	}
	return true
}

func unhex(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10
	}
	return -1
}

func u4(b []byte) rune {
	return unhex(b[0])<<12 | unhex(b[1])<<8 | unhex(b[2])<<4 | unhex(b[3])
}

// unescape appends the string raw (checked by str) to dst as encoding/json decodes it, and
// reports false when the result would not fit dst's capacity: it never grows dst.
func unescape(raw, dst []byte) ([]byte, bool) {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			if len(dst) == cap(dst) {
				return nil, false
			}
			dst = append(dst, c)
			i++
			continue
		}
		r := rune(raw[i+1])
		i += 2
		switch r {
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			r = u4(raw[i : i+4])
			i += 4
			if utf16.IsSurrogate(r) {
				// A valid pair makes one rune; anything else is U+FFFD, as in encoding/json.
				d := utf8.RuneError
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if d = utf16.DecodeRune(r, u4(raw[i+2:i+6])); d != utf8.RuneError {
						i += 6
					}
				}
				r = d
			}
		}
		if len(dst)+utf8.RuneLen(r) > cap(dst) {
			return nil, false
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst, true
}
