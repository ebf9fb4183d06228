package sale

import (
	"encoding/json"
	"errors"
	"strconv"
)

// Answer is what a reservation's answer body says: the discount of a 201, the error code of a
// refusal. The other members of the object are skipped.
type Answer struct {
	Discount    int64
	HasDiscount bool
	Error       string
}

// errNotAnswer is returned for a body that is not a JSON object whose discountAmount, if
// present and not null, is an int64 and whose error, if present and not null, is a string.
var errNotAnswer = errors.New("sale: the answer is not a JSON object with an integer discountAmount and a string error")

// ParseAnswer reads body as encoding/json would read it into map[string]json.RawMessage and
// then discountAmount into an int64 and error into a string, without allocating for the
// bodies the API sends. The fuzz target holds it to that.
func ParseAnswer(body []byte) (Answer, error) {
	p := scanner{b: body}
	p.space()
	if !p.eat('{') {
		return Answer{}, errNotAnswer
	}
	var a Answer
	p.space()
	if p.eat('}') {
		return p.finish(a)
	}
	for {
		p.space()
		key, ok := p.str()
		if !ok {
			return Answer{}, errNotAnswer
		}
		p.space()
		if !p.eat(':') {
			return Answer{}, errNotAnswer
		}
		p.space()
		start := p.i
		if !p.value(0) {
			return Answer{}, errNotAnswer
		}
		raw := body[start:p.i]
		switch string(unquote(key)) {
		case "discountAmount":
			if string(raw) == "null" {
				break
			}
			n, ok := integer(raw)
			if !ok {
				return Answer{}, errNotAnswer
			}
			a.Discount, a.HasDiscount = n, true
		case "error":
			if string(raw) == "null" {
				break
			}
			s, ok := unquoteValue(raw)
			if !ok {
				return Answer{}, errNotAnswer
			}
			a.Error = s
		}
		p.space()
		if p.eat('}') {
			return p.finish(a)
		}
		if !p.eat(',') {
			return Answer{}, errNotAnswer
		}
	}
}

// finish returns a if only white space follows the object.
func (p *scanner) finish(a Answer) (Answer, error) {
	p.space()
	if p.i != len(p.b) {
		return Answer{}, errNotAnswer
	}
	return a, nil
}

// unquote returns a key's bytes between its quotes, decoded if it has escapes.
func unquote(quoted []byte) []byte {
	inner := quoted[1 : len(quoted)-1]
	for _, c := range inner {
		if c == '\\' || c >= 0x80 {
			var s string
			if json.Unmarshal(quoted, &s) != nil {
				return nil
			}
			return []byte(s)
		}
	}
	return inner
}

// unquoteValue returns a JSON string value as a Go string; ok is false for any other value.
func unquoteValue(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	return string(unquote(raw)), true
}

// integer parses a JSON number that is an int64 with no fraction or exponent.
func integer(raw []byte) (int64, bool) {
	for i, c := range raw {
		if (c < '0' || c > '9') && !(i == 0 && c == '-') {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

// maxDepth is encoding/json's bound on nesting.
const maxDepth = 10000

// scanner checks JSON grammar over b from i.
type scanner struct {
	b []byte
	i int
}

func (p *scanner) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *scanner) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str scans a string and returns it with its quotes.
func (p *scanner) str() ([]byte, bool) {
	start := p.i
	if !p.eat('"') {
		return nil, false
	}
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return p.b[start:p.i], true
		case c < 0x20:
			return nil, false
		case c == '\\':
			p.i++
			if p.i >= len(p.b) {
				return nil, false
			}
			switch p.b[p.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i++
			case 'u':
				if p.i+5 > len(p.b) {
					return nil, false
				}
				for _, h := range p.b[p.i+1 : p.i+5] {
					if !isHex(h) {
						return nil, false
					}
				}
				p.i += 5
			default:
				return nil, false
			}
		default:
			p.i++
		}
	}
	return nil, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// value scans one JSON value.
func (p *scanner) value(depth int) bool {
	if p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '{' || c == '[':
		return p.container(depth + 1)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if len(p.b)-p.i >= len(lit) && string(p.b[p.i:p.i+len(lit)]) == lit {
				p.i += len(lit)
				return true
			}
		}
		return false
	}
}

func (p *scanner) container(depth int) bool {
	if depth > maxDepth {
		return false
	}
	closer := byte(']')
	object := p.b[p.i] == '{'
	if object {
		closer = '}'
	}
	p.i++
	p.space()
	if p.eat(closer) {
		return true
	}
	for {
		p.space()
		if object {
			if _, ok := p.str(); !ok {
				return false
			}
			p.space()
			if !p.eat(':') {
				return false
			}
			p.space()
		}
		if !p.value(depth) {
			return false
		}
		p.space()
		if p.eat(closer) {
			return true
		}
		if !p.eat(',') {
			return false
		}
	}
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *scanner) number() bool {
	p.eat('-')
	if p.eat('0') {
	} else if !p.digits() {
		return false
	}
	if p.eat('.') && !p.digits() {
		return false
	}
	if p.eat('e') || p.eat('E') {
		if !p.eat('+') {
			p.eat('-')
		}
		if !p.digits() {
			return false
		}
	}
	return true
}

func (p *scanner) digits() bool {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

// codes are the error codes the API answers; intern returns them without a new string.
var codes = map[string]string{}

func init() {
	for _, c := range []string{"OUT_OF_STOCK", "ALREADY_USED", "RESERVATION_RELEASED", "RESERVATION_CONFIRMED",
		"RESERVATION_NOT_FOUND", "VOUCHER_NOT_FOUND", "NOT_ELIGIBLE", "BAD_REQUEST", "UNAVAILABLE", "PAYLOAD_TOO_LARGE"} {
		codes[c] = c
	}
}

func intern(code string) string {
	if c, ok := codes[code]; ok {
		return c
	}
	return code
}
