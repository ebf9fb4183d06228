package orderid

import (
	"encoding/json"
	"strings"
	"testing"

	gojson "github.com/goccy/go-json"

	"vouchergate/shared/wire"
)

func TestExtract(t *testing.T) {
	long := strings.Repeat("x", 64)
	tests := []struct {
		name string
		body string
		want string // "" means not found
	}{
		{"plain", `{"customerId":"c1","orderId":"o-1","orderAmount":123}`, "o-1"},
		{"first key", `{"orderId":"A","customerId":"c"}`, "A"},
		// The seed's clients send customerId as a number: it is a value to skip like any other.
		{"numeric customerId", `{"customerId":42,"orderId":"o-1","orderAmount":123}`, "o-1"},
		{"numeric customerId after", `{"orderId":"o-1","customerId":9223372036854775807}`, "o-1"},
		{"numeric customerId last", `{"orderAmount":0,"orderId":"o-1","customerId":0}`, "o-1"},
		// The backend refuses these customerIds (400), but reads the same orderId: the edge may
		// answer a sold-out voucher's new order 409 as for any other bad body.
		{"customerId beyond 64 bits", `{"customerId":18446744073709551616,"orderId":"o-1"}`, "o-1"},
		{"customerId a fraction", `{"customerId":-4.2e-3,"orderId":"o-1"}`, "o-1"},
		{"customerId with a leading zero", `{"customerId":042,"orderId":"o-1"}`, ""},
		{"customerId with a plus", `{"customerId":+42,"orderId":"o-1"}`, ""},
		{"customerId a bare minus", `{"customerId":-,"orderId":"o-1"}`, ""},
		{"customerId a bare fraction", `{"customerId":4.,"orderId":"o-1"}`, ""},
		{"customerId a bare exponent", `{"customerId":4e,"orderId":"o-1"}`, ""},
		{"trailing ]", `{"customerId":42,"orderId":"o-1"}]`, ""},
		{"trailing }", `{"customerId":42,"orderId":"o-1"}}`, ""},
		{"spaces", " \n{ \"orderId\" :\t\"o 2\" , \"x\":1 }\r\n", "o 2"},
		{"nested values skipped", `{"a":{"orderId":"inner","b":[1,2.5e-3,{"c":null}]},"orderId":"outer","t":true,"f":false}`, "outer"},
		{"escaped value", `{"orderId":"a\"b\\c\u00e9\ud83d\ude00"}`, "a\"b\\cé😀"},
		{"escaped key", `{"order\u0049d":"k"}`, "k"},
		// encoding/json reads U+FFFD, which the backend refuses (wire.CheckText)
		{"lone surrogate", `{"orderId":"a\ud800b"}`, ""},
		{"U+FFFD", `{"orderId":"a\ufffdb"}`, ""},
		{"C1 control in id", `{"orderId":"a\u0085"}`, ""},
		{"dot", `{"orderId":"."}`, ""},
		{"two dots", `{"orderId":".."}`, ""},
		{"three dots", `{"orderId":"..."}`, "..."},
		{"64 bytes", `{"orderId":"` + long + `"}`, long},
		{"65 bytes", `{"orderId":"` + long + `x"}`, ""},
		{"65 bytes escaped", `{"orderId":"` + long + `\u0041"}`, ""},
		{"missing", `{"customerId":"c"}`, ""},
		{"empty object", `{}`, ""},
		{"empty id", `{"orderId":""}`, ""},
		{"number id", `{"orderId":12}`, ""},
		{"null id", `{"orderId":null}`, ""},
		{"repeated", `{"orderId":"a","orderId":"b"}`, ""},
		{"case folded key", `{"orderid":"a"}`, ""},
		{"case folded key beside exact", `{"orderId":"a","ORDERID":"b"}`, ""},
		{"non-ASCII key near orderId is ambiguous", `{"orderI` + "\u212a" + `":"a"}`, ""},
		{"other long key", `{"orderIdentifier":"x","orderId":"a"}`, "a"},
		{"slash in id", `{"orderId":"a/b"}`, ""},
		{"escaped slash in id", `{"orderId":"a\/b"}`, ""},
		{"control in id", `{"orderId":"a\u0001"}`, ""},
		{"raw control", "{\"orderId\":\"a\x01\"}", ""},
		{"invalid utf-8 id", "{\"orderId\":\"a\xffb\"}", ""},
		{"trailing garbage", `{"orderId":"a"} x`, ""},
		{"trailing comma", `{"orderId":"a",}`, ""},
		{"bad number", `{"n":01,"orderId":"a"}`, ""},
		{"bad literal", `{"n":tru,"orderId":"a"}`, ""},
		{"bad escape", `{"orderId":"a\x"}`, ""},
		{"short unicode escape", `{"orderId":"a\u12"}`, ""},
		{"unterminated", `{"orderId":"a`, ""},
		{"array", `["orderId","a"]`, ""},
		{"empty", ``, ""},
		{"too deep", `{"a":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `,"orderId":"a"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf Buffer
			got, ok := Extract([]byte(tt.body), &buf)
			if tt.want == "" {
				if ok {
					t.Fatalf("Extract(%q) = %q, true; want not found", tt.body, got)
				}
				return
			}
			if !ok || string(got) != tt.want {
				t.Fatalf("Extract(%q) = %q, %v; want %q", tt.body, got, ok, tt.want)
			}
			agreesWithEncodingJSON(t, []byte(tt.body), got)
		})
	}
}

func TestExtractDoesNotAllocate(t *testing.T) {
	for _, body := range []string{
		`{"customerId":"c1","orderId":"order-123456","orderAmount":123}`,
		`{"customerId":"c1","orderId":"order-\u00e9","orderAmount":123}`,
		`{"customerId":"c1","orderAmount":123}`,
		`{"customerId":9223372036854775807,"orderId":"order-123456","orderAmount":123}`,
	} {
		b := []byte(body)
		var buf Buffer
		if n := testing.AllocsPerRun(100, func() { Extract(b, &buf) }); n != 0 {
			t.Errorf("Extract(%s) allocates %v times; want 0", body, n)
		}
	}
}

// agreesWithEncodingJSON checks that the backend's decoder reads the same orderId.
func agreesWithEncodingJSON(t *testing.T, body, id []byte) {
	t.Helper()
	var req struct {
		OrderID string `json:"orderId"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("Extract found %q in a body encoding/json refuses: %v\n%q", id, err, body)
	}
	if req.OrderID != string(id) {
		t.Fatalf("Extract found %q, encoding/json %q, in %q", id, req.OrderID, body)
	}
	if err := wire.CheckID("orderId", string(id), len(Buffer{})); err != nil {
		t.Fatalf("Extract found %q, which the backend refuses: %v", id, err)
	}
}

func FuzzExtract(f *testing.F) {
	for _, s := range []string{
		`{"customerId":"c1","orderId":"o-1","orderAmount":123}`,
		`{"orderId":"a\"b\\c\u00e9\ud83d\ude00"}`,
		`{"order\u0049d":"k","x":[1,{"y":null}]}`,
		`{"orderId":"a","orderId":"b"}`,
		`{"orderid":"a"}`,
		`{"orderId":"a\ud800\ud800b"}`,
		`{"n":-0.5E+7,"orderId":"x"}`,
		`{"customerId":42,"orderId":"o-1","orderAmount":123}`,
		`{"customerId":042,"orderId":"o-1"}`,
		`{"customerId":1,"orderId":"o-1"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var buf Buffer
		id, ok := Extract(body, &buf)
		if !ok {
			return
		}
		agreesWithEncodingJSON(t, body, id)
	})
}

// The edge's scanner beside encoding/json and github.com/goccy/go-json reading the same
// orderId: it runs on every reservation of a sold-out voucher, where the edge must allocate
// nothing (make bench-edge).
func BenchmarkExtract(b *testing.B) {
	body := []byte(`{"customerId":"customer-000042","orderId":"order-0000000042","orderAmount":150000}`)
	var req struct {
		OrderID string `json:"orderId"`
	}
	readers := []struct {
		name string
		read func() bool
	}{
		{"scanner", func() bool { var buf Buffer; _, ok := Extract(body, &buf); return ok }},
		{"encoding-json", func() bool { return json.Unmarshal(body, &req) == nil && req.OrderID != "" }},
		{"goccy-go-json", func() bool { return gojson.Unmarshal(body, &req) == nil && req.OrderID != "" }},
	}
	for _, r := range readers {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if !r.read() {
					b.Fatal("not found")
				}
			}
		})
	}
}
