package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCustomerIDUnmarshal(t *testing.T) {
	tests := []struct {
		json     string
		want     string // when accepted
		mentions string // when refused: a part of the message
	}{
		{`42`, "42", ""},
		{`"42"`, "42", ""},
		{`0`, "0", ""},
		{`9223372036854775807`, "9223372036854775807", ""},
		{`"042"`, "042", ""}, // a string is an opaque id: not the customer 42
		{`"alice"`, "alice", ""},
		{`"a\u00e9\/b"`, "aé/b", ""}, // escapes as encoding/json reads them; CheckID refuses '/' later
		{`"9223372036854775808"`, "9223372036854775808", ""},
		{`null`, "", ""},
		{`9223372036854775808`, "", "beyond a signed 64-bit integer"},
		{`18446744073709551616`, "", "beyond a signed 64-bit integer"},
		{`4.2`, "", "not a whole number"},
		{`42.0`, "", "not a whole number"},
		{`1e3`, "", "exponent"},
		{`1E+3`, "", "exponent"},
		{`-1`, "", "minus sign"},
		{`-0`, "", "minus sign"},
		{`true`, "", "must not be true"},
		{`{}`, "", "object"},
		{`["42"]`, "", "array"},
	}
	for _, tt := range tests {
		var c CustomerID
		err := c.UnmarshalJSON([]byte(tt.json))
		if tt.mentions != "" {
			if err == nil || !strings.Contains(err.Error(), tt.mentions) || !strings.Contains(err.Error(), "customerId") ||
				!strings.Contains(err.Error(), "9223372036854775807, or a string") {
				t.Errorf("%s: %q, %v; want an error naming customerId, %q and the expected form", tt.json, c, err, tt.mentions)
			}
			continue
		}
		if err != nil || string(c) != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.json, c, err, tt.want)
		}
	}
}

// Through encoding/json, in a struct, as the backend decodes a reservation.
func TestCustomerIDInReserveRequest(t *testing.T) {
	var a, b ReserveRequest
	if err := json.Unmarshal([]byte(`{"customerId":42,"orderId":"o"}`), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{"customerId":"42","orderId":"o"}`), &b); err != nil {
		t.Fatal(err)
	}
	if a.CustomerID != "42" || a != b {
		t.Fatalf("42 read as %+v, \"42\" as %+v; want the same customer", a, b)
	}
	out, err := json.Marshal(a)
	if err != nil || !strings.Contains(string(out), `"customerId":"42"`) {
		t.Fatalf("encodes as %s, %v; want the customerId as a string", out, err)
	}
	err = json.Unmarshal([]byte(`{"customerId":1.5}`), &a)
	if err == nil || !strings.Contains(err.Error(), "customerId 1.5 is not a whole number") {
		t.Fatalf("1.5: %v; want it refused by name", err)
	}
}
