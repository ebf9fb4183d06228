package httplog

import (
	"errors"
	"strings"
)

// maxDepth bounds the chain of wrapped errors errorWords follows.
const maxDepth = 8

// errorWords describes err without what fasthttp quotes of a request: for err and each error
// it wraps, the leading words of its message, up to the first byte that is not a letter, a
// space or '-' (fasthttp puts what it read after a quote, a colon or a number: never as leading
// words). "error when
// reading request headers: invalid header value \"Bearer x\x01\": buffer size=40" gives
// "error when reading request headers: invalid header value".
func errorWords(err error) string {
	var parts []string
	for depth := 0; err != nil && depth < maxDepth; depth++ {
		if w := leadingWords(strings.TrimPrefix(err.Error(), "fasthttp: ")); w != "" && (len(parts) == 0 || parts[len(parts)-1] != w) {
			parts = append(parts, w)
		}
		err = errors.Unwrap(err)
	}
	if len(parts) == 0 {
		return withheld
	}
	return strings.Join(parts, ": ")
}

// leadingWords returns the start of msg made of ASCII letters, spaces and '-', without the
// spaces and hyphens at its end.
func leadingWords(msg string) string {
	end := 0
	for end < len(msg) {
		c := msg[end]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == ' ' || c == '-') {
			break
		}
		end++
	}
	return strings.TrimRight(msg[:end], " -")
}
