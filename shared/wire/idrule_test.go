package wire

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCheckID(t *testing.T) {
	tests := []struct {
		id       string
		mentions string // "" when accepted; else a part of the message
	}{
		{"o-1", ""},
		{"é日本😀", ""},
		{"...", ""},
		{".a", ""},
		{"a..", ""},
		{"\u00a0", ""}, // NO-BREAK SPACE: the first rune past C1
		{"\u2028", ""}, // LINE SEPARATOR is not a control character
		{"\ufffe", ""}, // a noncharacter, but valid UTF-8 and not what bad input decodes to
		{"\u00c2", ""}, // C3 82: not C2
		{"\u0120", ""}, // C4 A0: 0x80-0x9F continuation bytes after another lead
		{"\uefbf", ""}, // EE BE BF
		{"\U0001fffd", ""},
		{"", "required"},
		{strings.Repeat("x", 65), "at most 64"},
		{"a\xffb", "not valid UTF-8"},
		{"a\xfe", "not valid UTF-8"},
		{"\xc2", "not valid UTF-8"},
		{"\xed\xb3\xbf", "not valid UTF-8"}, // a surrogate encoded as UTF-8
		{"M-\ufffd", "U+FFFD"},
		{"\x00", "U+0000"},
		{"a\tb", "U+0009"},
		{"a\x7f", "U+007F"},
		{"a\u0080", "U+0080"},
		{"a\u0085", "U+0085"},
		{"a\u009f", "U+009F"},
		{"a/b", "'/'"},
		{".", `must not be "."`},
		{"..", `must not be ".."`},
	}
	for _, tt := range tests {
		err := CheckID("orderId", tt.id, MaxOrderIDLen)
		if tt.mentions == "" {
			if err != nil || !IsOrderID([]byte(tt.id)) {
				t.Errorf("%q: %v, IsOrderID %v; want it taken", tt.id, err, IsOrderID([]byte(tt.id)))
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.mentions) || !strings.HasPrefix(err.Error(), "orderId ") {
			t.Errorf("%q: %v; want an error naming orderId and %q", tt.id, err, tt.mentions)
		}
		if IsOrderID([]byte(tt.id)) {
			t.Errorf("IsOrderID(%q) = true; CheckID says %v", tt.id, err)
		}
	}
}

// CheckText is CheckID without what only a path needs.
func TestCheckText(t *testing.T) {
	for _, s := range []string{"a/b", ".", "..", "", "+86 138-0000-0000"} {
		if err := CheckText("identity", s); err != nil {
			t.Errorf("%q: %v; want it taken", s, err)
		}
	}
	for _, s := range []string{"a\xff", "a\ufffd", "a\u0085", "a\n"} {
		if err := CheckText("identity", s); err == nil || !strings.HasPrefix(err.Error(), "identity ") {
			t.Errorf("%q: %v; want an error naming identity", s, err)
		}
	}
}

func TestIsOrderIDDoesNotAllocate(t *testing.T) {
	id := []byte(strings.Repeat("é", 32))
	if n := testing.AllocsPerRun(100, func() { IsOrderID(id) }); n != 0 {
		t.Errorf("IsOrderID allocates %v times; want 0", n)
	}
}

// stdIDRule is the id rule read from its words with the unicode package: valid UTF-8, no
// unicode.IsControl rune (C0, DEL, C1), no U+FFFD, no '/', not "." or "..".
func stdIDRule(s string, max int) bool {
	return s != "" && len(s) <= max && utf8.ValidString(s) && s != "." && s != ".." &&
		!strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError || r == '/' })
}

// go test -fuzz=FuzzCheckID ./shared/wire: CheckID and IsOrderID take exactly what stdIDRule
// takes, and every refusal names the field.
func FuzzCheckID(f *testing.F) {
	for _, s := range []string{"o-1", ".", "..", "...", "a\u0085", "a\u009f\u00a0", "a\ufffd", "a\xff", "\xc2", "a/b", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := CheckID("orderId", s, MaxOrderIDLen)
		want := stdIDRule(s, MaxOrderIDLen)
		if (err == nil) != want || IsOrderID([]byte(s)) != want {
			t.Fatalf("%q: CheckID %v, IsOrderID %v; the rule says %v", s, err, IsOrderID([]byte(s)), want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "orderId ") {
			t.Fatalf("%q: %v does not name orderId", s, err)
		}
	})
}
