package sale

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The summary says what its figures mean: the 201s beyond the grants are retries of granted
// orders, a first OUT_OF_STOCK before the sell-out is told in that order and why, and a
// generator that fell behind its schedule is warned of.
func TestSummaryExplainsItsFigures(t *testing.T) {
	h := recordedSale()
	s := Summarize(h, Judge(h))
	if s.Repeated201 != 5 || s.GeneratorLate || len(s.Warnings) != 0 {
		t.Errorf("repeated 201s %d (want 5: the retries of granted orders), late %v, warnings %q", s.Repeated201, s.GeneratorLate, s.Warnings)
	}
	var out bytes.Buffer
	s.Print(&out)
	if !strings.Contains(out.String(), "201: 15 is 10 orders granted and 5 retries of granted orders, answered their 201 again") {
		t.Errorf("the summary does not explain 201: 15 beside 10 granted:\n%s", out.String())
	}

	// the gate refused a new order at 3 ms, before the last winner's 201 at 13 ms
	h.Reservations[15].Done = 3 * time.Millisecond
	// and the generator sent a request 50 ms late
	h.Reservations[49].Sent = h.Reservations[49].Scheduled + 50*time.Millisecond
	s = Summarize(h, Judge(h))
	out.Reset()
	s.Print(&out)
	text := out.String()
	first, sold := strings.Index(text, "first OUT_OF_STOCK at 3 ms"), strings.Index(text, "sold out at 13 ms")
	if first < 0 || sold < first || !strings.Contains(text, "every use was taken by the first") {
		t.Errorf("a first OUT_OF_STOCK before the sell-out is not told first, with why:\n%s", text)
	}
	if !s.GeneratorLate || !strings.Contains(text, "WARNING: the generator ran late") {
		t.Errorf("a request sent 50 ms late gave no warning:\n%s", text)
	}
}

// The summary records every setting, the seed resolved and the token never, and the command
// that sends the same traffic again.
func TestSummaryRecordsEverySettingAndTheReplay(t *testing.T) {
	h := recordedSale()
	h.Settings = Settings{Target: "http://127.0.0.1:8081", Admin: "http://127.0.0.1:8080", Token: "a-secret-token",
		Code: "REHEARSAL", Create: true, Uses: 10, PerCustomer: 1, Discount: 100, OrderAmount: 1000, Rate: 1000,
		Requests: 50, Connections: 8, Timeout: 10 * time.Second, Seed: 4242, MaxP99: 250 * time.Millisecond,
		Traffic: Traffic{Customers: 40, RetryShare: 0.2, SecondOrderShare: 0.05, ConfirmShare: 0.1, ReleaseShare: 0.1}}
	h.Settings.Token = "" // as Run records it
	s := Summarize(h, Judge(h))
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Settings map[string]any `json:"settings"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{"seed": 4242.0, "rate": 1000.0, "requests": 50.0, "connections": 8.0, "customers": 40.0,
		"retryShare": 0.2, "secondOrderShare": 0.05, "confirmShare": 0.1, "releaseShare": 0.1, "maxP99": "250ms",
		"timeout": "10s", "uses": 10.0, "create": true, "orderPrefix": "t-", "admin": "http://127.0.0.1:8080"} {
		if back.Settings[key] != want {
			t.Errorf("settings.%s = %v; want %v", key, back.Settings[key], want)
		}
	}
	if strings.Contains(string(b), "a-secret-token") {
		t.Error("the summary holds the admin token")
	}
	replay := s.Settings.Replay()
	for _, want := range []string{"-seed 4242", "-rate 1000", "-requests 50", "-retry-share 0.2", "-max-p99 250ms", "-create", "-code REHEARSAL"} {
		if !strings.Contains(replay, want) {
			t.Errorf("the replay %q lacks %q", replay, want)
		}
	}
	page := string(writeReport(t, h, s))
	for _, want := range []string{"4242", "-seed 4242", "second-order share"} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// With a latency goal the verdict holds the reservations' p99 to it.
func TestVerdictHoldsALatencyGoal(t *testing.T) {
	h := recordedSale() // its slowest answer took 7 ms
	for goal, pass := range map[time.Duration]bool{0: true, 100 * time.Millisecond: true, 2 * time.Millisecond: false} {
		h.Settings.MaxP99 = goal
		v := Judge(h)
		hasCheck := strings.Contains(v.String(), "latency")
		if v.Pass != pass || hasCheck != (goal > 0) {
			t.Errorf("goal %v: pass %v (want %v), a latency check %v:\n%s", goal, v.Pass, pass, hasCheck, v)
		}
	}
}

// The report colours each kind of answer by what it means, whatever else the run answered: a
// 503 red, a 201 green, a sold-out 409 grey.
func TestReportColoursAnswersByMeaning(t *testing.T) {
	for _, kinds := range [][]string{
		{"201", "409 OUT_OF_STOCK", "503 UNAVAILABLE"},
		{"201", "400 BAD_REQUEST", "409 ALREADY_USED", "409 OUT_OF_STOCK", "503 UNAVAILABLE", "failed: timeout"},
		{"503 UNAVAILABLE", "409 OUT_OF_STOCK", "201", "404 VOUCHER_NOT_FOUND", "422 NOT_ELIGIBLE"},
	} {
		c := answerColours(kinds)
		if c["503 UNAVAILABLE"] != "#d62728" || c["201"] != "#2ca02c" || c["409 OUT_OF_STOCK"] != "#7f7f7f" {
			t.Errorf("answers %v coloured %v; want 503 red, 201 green, 409 OUT_OF_STOCK grey", kinds, c)
		}
		seen := map[string]string{}
		for k, colour := range c {
			if other, ok := seen[colour]; ok {
				t.Errorf("%s and %s share %s", k, other, colour)
			}
			seen[colour] = k
		}
	}
	h := recordedSale()
	for i := 40; i < 45; i++ { // some retries answered 503
		h.Reservations[i] = Outcome{Scheduled: h.Reservations[i].Scheduled, Sent: h.Reservations[i].Sent,
			Done: h.Reservations[i].Done, State: Answered, Status: 503, Error: "UNAVAILABLE"}
	}
	page := string(writeReport(t, h, Summarize(h, Judge(h))))
	if !regexp.MustCompile(`fill="#d62728"[^>]*>■ 503 UNAVAILABLE`).MatchString(page) {
		t.Errorf("the report's 503 line is not red")
	}
}

func writeReport(t *testing.T, h *History, s Summary) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteReport(&b, h, s); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
