package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The one decoding toolkit of the API: every JSON body and query number is read here, and
// every complaint about one is worded here.

// strictness is what a body may hold besides its fields.
type strictness int

const (
	// lenient ignores unknown fields and takes bytes as encoding/json takes them, as the
	// voucher bodies always have: the edge finds orderIds exactly as encoding/json reads them.
	lenient strictness = iota
	// strict refuses unknown fields, and a body that is not UTF-8, which encoding/json would
	// quietly turn into U+FFFD, merging distinct identities (the quota bodies).
	strict
)

// Problems that both decoders, decodeJSON and the deduct scanner, name alike.
const (
	notObjectProblem = "the body must be a JSON object"
	trailerProblem   = "the body has data after the JSON object"
)

// checkBody refuses what no decoder should read: an empty body, and in strict mode one that is
// not UTF-8.
func checkBody(body []byte, mode strictness) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errors.New("a JSON body is required; this one is empty")
	}
	if mode == strict && !utf8.Valid(body) {
		return errors.New("the body is not valid UTF-8")
	}
	return nil
}

// decodeJSON decodes body, a single JSON object, into dst, with a message naming what is wrong.
// Only JSON white space may follow the object.
func decodeJSON(body []byte, dst any, mode strictness) error {
	if err := checkBody(body, mode); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if mode == strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(dst); err != nil {
		return jsonProblem(err)
	}
	// dec.More() would take a stray ']' or '}' for the end.
	for _, c := range body[dec.InputOffset():] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return errors.New(trailerProblem)
		}
	}
	return nil
}

// jsonProblem says what is wrong with a body in terms of its fields. An error of a field's own
// UnmarshalJSON (wire.CustomerID) names the field already and is kept as it is.
func jsonProblem(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field == "":
		return errors.New(notObjectProblem)
	case errors.As(err, &te):
		return fmt.Errorf("%s must not be %s; expected %s", te.Field, te.Value, jsonKind(te.Type))
	case errors.As(err, &se):
		return fmt.Errorf("the body is not valid JSON (at byte %d: %v)", se.Offset, se)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("the body is not valid JSON (it ends early)")
	}
	msg := err.Error()
	var pe *time.ParseError
	switch f, unknown := strings.CutPrefix(msg, "json: unknown field "); {
	case unknown:
		return errors.New("unknown field " + f)
	case errors.As(err, &pe) || strings.Contains(msg, "Time.UnmarshalJSON"):
		return errors.New("times must be RFC 3339, e.g. \"2025-11-11T00:00:00+08:00\"")
	case strings.HasPrefix(msg, "json: "):
		return errors.New("the body is not valid: " + strings.TrimPrefix(msg, "json: "))
	}
	return err
}

// jsonKind names what a field of type t holds, in JSON's words.
func jsonKind(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch k := t.Kind(); {
	case t == reflect.TypeFor[time.Time]():
		return "an RFC 3339 time"
	case k == reflect.String:
		return "a string"
	case k >= reflect.Int && k <= reflect.Uint64:
		return "an integer"
	case k == reflect.Bool:
		return "true or false"
	case k == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "an array of strings"
	case k == reflect.Slice:
		return "an array of objects"
	}
	return "an object"
}

// positiveInt reads a query or path value that must be a positive integer.
func positiveInt(name string, v []byte) (int64, error) {
	if len(v) == 0 {
		return 0, fmt.Errorf("%s is required", name)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s must be a positive integer", name)
	}
	return n, nil
}
