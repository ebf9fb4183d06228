package wire

import (
	"fmt"
	"unicode/utf8"
	"unsafe"
)

// The one rule for the ids the API takes, in bodies and in paths alike, so that an id is
// exactly what the client sent and names one thing: the reservation decoder, the quota
// service's checks of what the quota decoders read, the backend's confirm and release paths,
// and the edge's path check and sold-out orderId reader all call it.

// CheckID reports why s cannot be an orderId or a string customerId (named what), or nil. An
// id is 1 to max bytes of text (see CheckText) that fits one URL path segment: no '/', and
// neither "." nor "..", which every server resolves as a dot segment, so an order named so
// could never be confirmed or released.
func CheckID(what, s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is required", what)
	case len(s) > max:
		return fmt.Errorf("%s is %d bytes; at most %d", what, len(s), max)
	}
	return problem(what, s, idFault(s, true))
}

// CheckText reports why s, the value of the field named what, is not text an id may hold, or
// nil. Text is valid UTF-8 without control characters: C0 (U+0000–U+001F), DEL (U+007F) and
// C1 (U+0080–U+009F). It must not hold U+FFFD either: encoding/json decodes bytes that are not
// UTF-8 and lone surrogate escapes ("\udcff") to U+FFFD, so "M-\xff" and "M-\xfe" would
// otherwise become one id; refusing U+FFFD refuses them however the value was decoded. The
// quota identities, idemKeys and dimension values are text; CheckID adds what a path needs.
func CheckText(what, s string) error {
	return problem(what, s, idFault(s, false))
}

// IsOrderID reports whether b passes CheckID as an orderId, without allocating or keeping b:
// for the edge's sold-out path, which reads orderIds from bodies as bytes into a buffer on its
// stack.
func IsOrderID(b []byte) bool {
	// idFault only reads its argument and keeps nothing, so b need not be copied
	return len(b) > 0 && len(b) <= MaxOrderIDLen && idFault(unsafe.String(unsafe.SliceData(b), len(b)), true).kind == faultNone
}

type faultKind uint8

const (
	faultNone faultKind = iota
	faultUTF8
	faultReplacement
	faultControl
	faultSlash
	faultDots
)

// fault is what breaks the rule, and the rune at fault.
type fault struct {
	kind faultKind
	r    rune
}

// idFault finds the first thing in s that breaks the text rule, and with segment the path
// segment rule too. Past the UTF-8 check it looks at bytes only: U+0080–U+009F are C2 80–C2 9F,
// U+FFFD is EF BF BD.
func idFault(s string, segment bool) fault {
	if !utf8.ValidString(s) {
		return fault{kind: faultUTF8}
	}
	if segment && (len(s) == 1 && s[0] == '.' || len(s) == 2 && s[0] == '.' && s[1] == '.') {
		return fault{kind: faultDots}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == 0x7f:
			return fault{faultControl, rune(c)}
		case c == '/' && segment:
			return fault{faultSlash, '/'}
		case c == 0xc2 && i+1 < len(s) && s[i+1] <= 0x9f:
			return fault{faultControl, rune(s[i+1])}
		case c == 0xef && i+2 < len(s) && s[i+1] == 0xbf && s[i+2] == 0xbd:
			return fault{kind: faultReplacement}
		}
	}
	return fault{}
}

// problem words f for the field named what.
func problem(what, s string, f fault) error {
	switch f.kind {
	case faultUTF8:
		return fmt.Errorf("%s is not valid UTF-8; ids must be text as sent", what)
	case faultReplacement:
		return fmt.Errorf("%s holds U+FFFD, what bytes that are not UTF-8 and lone surrogate escapes (\\udcff) decode to; ids must be valid UTF-8", what)
	case faultControl:
		return fmt.Errorf("%s contains %U; control characters (U+0000–U+001F, U+007F–U+009F) are not allowed", what, f.r)
	case faultSlash:
		return fmt.Errorf("%s contains '/', which is not allowed", what)
	case faultDots:
		return fmt.Errorf("%s must not be %q: \".\" and \"..\" are dot segments no path can name", what, s)
	}
	return nil
}
