// Package orderid reads the orderId of a reservation request from its JSON body without decoding
// the rest and without allocating, so that the edge can tell a granted order's retry from a new
// order on its sold-out path.
//
// It answers only when it is certain to read the body as the backend's encoding/json decoder
// does. Anything else (invalid JSON, a missing, repeated or non-string orderId, a key equal to
// "orderId" only when case is ignored, an id the backend would refuse) is reported as not found,
// and the edge forwards the request: forwarding is always safe, a wrong local answer is not.
package orderid

import (
	"unicode/utf8"

	"vouchergate/shared/wire"
)

// Buffer receives an orderId that had to be unescaped.
type Buffer [wire.MaxOrderIDLen]byte

// maxDepth bounds the nesting the scanner follows; deeper bodies are not read.
const maxDepth = 32

var key = []byte("orderId")

// Extract returns the orderId of body, a JSON object, and true; or false when it cannot be
// certain of it. The id is a slice of body, or of buf when the value had escapes; it is valid
// until either changes. Extract does not allocate.
func Extract(body []byte, buf *Buffer) ([]byte, bool) {
	s := scanner{b: body}
	s.space()
	if !s.consume('{') {
		return nil, false
	}
	var id []byte
	found := false
	s.space()
	if s.consume('}') {
		return nil, false
	}
	for {
		s.space()
		k, escaped, ok := s.str()
		if !ok {
			return nil, false
		}
		s.space()
		if !s.consume(':') {
			return nil, false
		}
		s.space()
		switch keyMatch(k, escaped) {
		case matchExact:
			if found {
				return nil, false // repeated: encoding/json takes the last, do not guess
			}
			v, esc, ok := s.str()
			if !ok {
				return nil, false // not a string, or malformed
			}
			if esc {
				if v, ok = unescape(v, buf[:0]); !ok {
					return nil, false
				}
			}
			id, found = v, true
		case matchFold:
			return nil, false // the backend would take it for orderId too
		default:
			if !s.value(0) {
				return nil, false
			}
		}
		s.space()
		if s.consume(',') {
			continue
		}
		if s.consume('}') {
			break
		}
		return nil, false
	}
	s.space()
	if s.i != len(s.b) || !found || !validID(id) {
		return nil, false
	}
	return id, true
}

type match int

const (
	matchNone match = iota
	matchExact
	matchFold
)

// keyMatch compares a raw key (escapes still in it) with "orderId".
func keyMatch(k []byte, escaped bool) match {
	if escaped {
		var kb [32]byte
		u, ok := unescape(k, kb[:0])
		if !ok {
			return matchFold // cannot tell: treat as ambiguous
		}
		k = u
	}
	if string(k) == "orderId" {
		return matchExact
	}
	if len(k) <= 4*len(key) && foldEqual(k, key) {
		return matchFold
	}
	return matchNone
}

// foldEqual is bytes.EqualFold over runes, counting any non-ASCII rune as a possible match
// (Unicode folds K, the Kelvin sign, to k): a false "equal" only forwards the request.
func foldEqual(s, ascii []byte) bool {
	j := 0
	for i := 0; i < len(s); {
		if j >= len(ascii) {
			return false
		}
		c := s[i]
		if c >= utf8.RuneSelf {
			_, n := utf8.DecodeRune(s[i:])
			i += n
			j++
			continue
		}
		if lower(c) != lower(ascii[j]) {
			return false
		}
		i++
		j++
	}
	return j == len(ascii)
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// validID is wire's id rule (wire.CheckID), which the backend applies to the same orderId.
func validID(id []byte) bool { return wire.IsOrderID(id) }
