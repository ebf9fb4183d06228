package token

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

// ErrCritical: the header names extensions in crit, none of which the edge understands (RFC
// 7515 §4.1.11: such a token MUST be refused).
var ErrCritical = errors.New("the token names critical extensions (crit) the edge does not understand")

// timeClaims must be JSON numbers (RFC 7519 NumericDate). golang-jwt also takes a string
// holding a number, which an issuer never writes.
var timeClaims = map[string]bool{"exp": true, "nbf": true, "iat": true}

// checkStrict refuses what golang-jwt lets through: a crit header, a time claim that is not a
// number, and a member named twice in the header or the claims (encoding/json keeps the last,
// so a second sub could say something other than what a reader of the first believes). It
// reads only the first two parts; the signature is checked after it.
func checkStrict(raw string) error {
	head, rest, ok := strings.Cut(raw, ".")
	if !ok {
		return ErrMalformed
	}
	claims, _, ok := strings.Cut(rest, ".")
	if !ok {
		return ErrMalformed
	}
	header, err := members(head)
	if err != nil {
		return err
	}
	if _, ok := header["crit"]; ok {
		return ErrCritical
	}
	payload, err := members(claims)
	if err != nil {
		return err
	}
	for name := range timeClaims {
		if v, ok := payload[name]; ok && !isNumber(v) {
			return ErrMalformed
		}
	}
	return nil
}

// members decodes part, base64url JSON object, into its members, refusing one named twice.
func members(part string) (map[string]json.RawMessage, error) {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return nil, ErrMalformed
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, ErrMalformed
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, ErrMalformed
		}
		name, ok := t.(string)
		if !ok {
			return nil, ErrMalformed
		}
		if _, seen := m[name]; seen {
			return nil, ErrMalformed
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, ErrMalformed
		}
		m[name] = v
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, ErrMalformed
	}
	if _, err := dec.Token(); err == nil { // anything after the object
		return nil, ErrMalformed
	}
	return m, nil
}

// isNumber reports whether v, one JSON value, is a number.
func isNumber(v json.RawMessage) bool {
	return len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9'))
}
