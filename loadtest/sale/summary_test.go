package sale

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestSummaryOfARecordedSale(t *testing.T) {
	h := recordedSale()
	s := Summarize(h, Judge(h))
	// the last of the 10 orders granted to be answered was request 6, due at 6 ms, answered 7 ms later
	if s.SoldOutMs == nil || *s.SoldOutMs != 13 || s.FirstOOSMs == nil || *s.FirstOOSMs != 14 {
		t.Errorf("sold out at %v, first OUT_OF_STOCK at %v; want 13 and 14 ms", s.SoldOutMs, s.FirstOOSMs)
	}
	if s.Offered != 50 || s.Sent != 50 || s.Answered() != 50 || s.Granted != 10 || s.Confirmed != 1 || s.Released != 1 {
		t.Errorf("counts: %+v", s)
	}
	if s.Answers["201"] != 15 || s.Answers["409 OUT_OF_STOCK"] != 35 {
		t.Errorf("answers %v", s.Answers)
	}
	if near := func(v float64) bool { return v >= 7 && v < 7.01 }; !near(s.Latency.Max) || !near(s.Before.Max) || s.After.P50 == 0 { // HDR: 3 significant digits
		t.Errorf("latency %+v, before the sell-out %+v, after %+v", s.Latency, s.Before, s.After)
	}
	var out bytes.Buffer
	s.Print(&out)
	for _, want := range []string{"50 reservations offered", "sold out at 13 ms", "verdict: PASS", "p99.9"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the summary lacks %q:\n%s", want, out.String())
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil || back["verdict"].(map[string]any)["pass"] != true || back["soldOutMs"] != 13.0 {
		t.Errorf("JSON %s: %v", b, err)
	}
}
