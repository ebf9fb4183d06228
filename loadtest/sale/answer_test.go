package sale

import (
	"encoding/json"
	"testing"
)

// oracle reads body with encoding/json, which ParseAnswer promises to read as.
func oracle(body []byte) (Answer, bool) {
	a, err := parseAnswer(json.Unmarshal, body)
	return a, err == nil
}

var answerSeeds = []string{
	`{"orderId":"o1-7","discountAmount":100}`,
	`{"error":"OUT_OF_STOCK","message":"no uses left"}`,
	`{"error":"ALREADY_USED"}`,
	` { "discountAmount" : -0 , "x" : [1, {"a": null}, "\u00e9"] } `,
	`{"discount\u0041mount":5,"discountAmount":6}`,
	`{"discountAmount":1.0}`, `{"discountAmount":1e2}`, `{"discountAmount":"7"}`,
	`{"discountAmount":9223372036854775808}`, `{"error":12}`, `{"error":null}`,
	`null`, `[]`, `{}`, `{"a":1}x`, `{"a":01}`, `{"a":"\x"}`, "{\"a\":\"\x01\"}", `{"e":"\ud800"}`,
}

func TestParseAnswerAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range answerSeeds {
		got, err := ParseAnswer([]byte(s))
		want, ok := oracle([]byte(s))
		if (err == nil) != ok || got != want {
			t.Errorf("ParseAnswer(%s) = %+v, %v; encoding/json: %+v, %v", s, got, err, want, ok)
		}
	}
}

func FuzzParseAnswer(f *testing.F) {
	for _, s := range answerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := ParseAnswer(body)
		want, ok := oracle(body)
		if (err == nil) != ok || got != want {
			t.Fatalf("ParseAnswer(%q) = %+v, %v; encoding/json: %+v, %v", body, got, err, want, ok)
		}
	})
}
