package orderid

import (
	"encoding/json"
	"testing"

	"vouchergate/shared/wire"
)

// read is the edge's whole reading of a reservation body: the fast scanner, then the full decode
// for what it is not certain of.
func read(body []byte) (string, bool) {
	var buf Buffer
	if id, ok := Extract(body, &buf); ok {
		return string(id), true
	}
	return Decode(body)
}

// oracle is what the backend concludes of body: json.Unmarshal into the wire type (one JSON
// value, only white space after it), then the orderId check.
func oracle(body []byte) (string, bool) {
	var req wire.ReserveRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return "", false
	}
	if wire.CheckID("orderId", req.OrderID, wire.MaxOrderIDLen) != nil {
		return "", false
	}
	return req.OrderID, true
}

// onlyOrderID is what encoding/json reads as the orderId when nothing else in the body counts.
func onlyOrderID(body []byte) (string, bool) {
	var v struct {
		OrderID string `json:"orderId"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return "", false
	}
	return v.OrderID, true
}

func TestDecodeReadsWhatTheScannerLeaves(t *testing.T) {
	for _, tt := range []struct {
		body string
		id   string
		ok   bool
	}{
		{`{"OrderId":"o-1"}`, "o-1", true},
		{`{"orderId":"a","orderId":"b"}`, "b", true},
		{`{"orderId":"a","ORDERID":"b"}`, "b", true},
		{`{"order\u0049d":"esc","x":1}`, "esc", true},
		{`{"orderId":"a/b"}`, "", false},                 // the backend refuses the id
		{`{"orderId":"a","customerId":true}`, "", false}, // the backend refuses the body
		{`{"orderId":"a"} x`, "", false},
		{` `, "", false},
		{`null`, "", false},
	} {
		id, ok := Decode([]byte(tt.body))
		if id != tt.id || ok != tt.ok {
			t.Errorf("Decode(%s) = %q, %v; want %q, %v", tt.body, id, ok, tt.id, tt.ok)
		}
	}
}

// FuzzRead compares the edge's reading of a body with the backend's (encoding/json): whenever the
// backend would read an orderId, the edge reads the same one, and the edge reads one the backend
// would not only where its fast scanner is certain of the orderId alone (it does not check the
// other fields' types), which encoding/json then reads the same.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		`{"customerId":"c1","orderId":"o-1","orderAmount":123}`,
		`{"customerId":"c1","OrderId":"o-1","orderAmount":123}`,
		`{"orderId":"a","orderId":"b"}`,
		`{"orderId":"a","ORDERID":"b","orderAmount":1}`,
		`{"orderıd":"x","customerId":7}`,
		`{"order\u0049d":"k","x":[1,{"y":null}]}`,
		`{"orderId":"a\ud800\ud800b"}`,
		`{"customerId":042,"OrderId":"o-1"}`,
		`{"OrderId":"o-1"}]`,
		"{\"OrderId\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := read(body)
		want, wantOK := oracle(body)
		switch {
		case wantOK && (!ok || got != want):
			t.Fatalf("body %q: the edge reads %q, %v; the backend reads %q", body, got, ok, want)
		case ok && !wantOK:
			var buf Buffer
			if _, certain := Extract(body, &buf); !certain {
				t.Fatalf("body %q: the full decode reads %q; the backend refuses it", body, got)
			}
			if alone, aloneOK := onlyOrderID(body); !aloneOK || alone != got {
				t.Fatalf("body %q: the scanner reads %q; encoding/json reads %q, %v", body, got, alone, aloneOK)
			}
		}
	})
}
