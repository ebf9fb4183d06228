package sale

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Summary is what a run measured, as printed and as written with --json. Times are in
// milliseconds from the start of the sale's schedule.
type Summary struct {
	Target  string  `json:"target"`
	Code    string  `json:"code"`
	Rate    float64 `json:"rate"`    // asked for, per second
	Offered int     `json:"offered"` // reservations scheduled
	Sent    int     `json:"sent"`
	// OfferedRate is the rate requests were actually sent at; SendLateP99Ms how late the 99th
	// percentile left after its scheduled time (the generator keeping up, or not).
	OfferedRate   float64 `json:"offeredRate"`
	SendLateP99Ms float64 `json:"sendLateP99Ms"`
	AchievedRate  float64 `json:"achievedRate"` // answers per second
	// GeneratorCores is the generator's CPU time over the sale's length: the cores it took.
	GeneratorCores float64        `json:"generatorCores"`
	Answers        map[string]int `json:"answers"`   // by kind: "201", "409 OUT_OF_STOCK", "failed: timeout"
	Latency        Percentiles    `json:"latencyMs"` // of every answered reservation, from its scheduled time
	// Before and After split Latency at the sell-out, by when requests were due: the queue
	// of the selling part against the sold-out answers (both zero if it did not sell out).
	Before  Percentiles `json:"latencyBeforeSoldOutMs"`
	After   Percentiles `json:"latencyAfterSoldOutMs"`
	Granted int         `json:"granted"`
	// Repeated201 are the 201s beyond the first of each granted order: its retries, answered
	// their 201 again. Answers["201"] is Granted plus these.
	Repeated201 int      `json:"repeated201"`
	SoldOutMs   *float64 `json:"soldOutMs"`         // when the last use left was granted; nil if it was not
	FirstOOSMs  *float64 `json:"firstOutOfStockMs"` // the first OUT_OF_STOCK answer
	Requests    int      `json:"requests"`          // sent in every phase: reservations, confirms and releases, re-sends
	Confirmed   int      `json:"confirmed"`
	Released    int      `json:"released"`
	// GeneratorLate says the generator could not keep to its schedule (GeneratorLateness):
	// latencies then include its own delay, and the target was offered less than the rate.
	GeneratorLate bool       `json:"generatorLate"`
	Warnings      []string   `json:"warnings,omitempty"`
	Settings      Parameters `json:"settings"` // every setting, the seed included: Settings.Replay() runs it again
	Verdict       Verdict    `json:"verdict"`
}

// GeneratorLateness is how late the generator may send and still be on schedule: its 99th
// percentile request leaving at most this after its scheduled time, and sending at 90% of the
// rate asked or more.
const GeneratorLateness = 10 * time.Millisecond

// Answered is the number of reservations that got an HTTP answer.
func (s Summary) Answered() int {
	n := s.Sent
	for k, c := range s.Answers {
		if strings.HasPrefix(k, "failed: ") {
			n -= c
		}
	}
	return n
}

// Percentiles of a latency distribution, in milliseconds.
type Percentiles struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99.9"`
	Max  float64 `json:"max"`
}

// newLatencyHistogram holds latencies in µs from 1 µs to 10 minutes with 3 significant digits.
func newLatencyHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentiles of latencies in µs, as recorded by the sender.
func percentiles(lat []Outcome) Percentiles {
	hist := newLatencyHistogram()
	for _, o := range lat {
		if o.State == Answered {
			_ = hist.RecordValue(int64(o.Latency() / time.Microsecond))
		}
	}
	at := func(q float64) float64 { return float64(hist.ValueAtQuantile(q)) / 1000 }
	return Percentiles{P50: at(50), P90: at(90), P99: at(99), P999: at(99.9), Max: float64(hist.Max()) / 1000}
}

// Summarize sums up h with its verdict v.
func Summarize(h *History, v Verdict) Summary {
	s := Summary{Target: h.Target, Code: h.Code, Rate: h.Rate, Offered: len(h.Plan), Answers: map[string]int{}, Verdict: v,
		Settings: parametersOf(h)}
	var lastSent, lastDone time.Duration
	var late []time.Duration
	var oos *time.Duration
	for _, o := range h.Reservations {
		s.Answers[o.Key()]++
		if o.State == NotSent {
			continue
		}
		s.Sent++
		lastSent, lastDone = max(lastSent, o.Sent), max(lastDone, o.Done)
		late = append(late, o.Sent-o.Scheduled)
		if o.State == Answered && o.Status == 409 && o.Error == "OUT_OF_STOCK" && (oos == nil || o.Done < *oos) {
			d := o.Done
			oos = &d
		}
	}
	if lastSent > 0 {
		s.OfferedRate = float64(s.Sent) / lastSent.Seconds()
	}
	if lastDone > 0 {
		s.AchievedRate = float64(s.Answered()) / lastDone.Seconds()
		s.GeneratorCores = h.GeneratorCPU.Seconds() / lastDone.Seconds()
	}
	if len(late) > 0 {
		sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
		s.SendLateP99Ms = ms(late[min(len(late)-1, len(late)*99/100)])
	}
	s.Latency = percentiles(h.Reservations)
	grants := h.Grants()
	s.Granted = len(grants)
	s.Repeated201 = s.Answers["201"] - s.Granted
	if at, ok := soldOut(h); ok {
		v := ms(at)
		s.SoldOutMs = &v
		var before, after []Outcome
		for _, o := range h.Reservations {
			if o.Scheduled < at {
				before = append(before, o)
			} else {
				after = append(after, o)
			}
		}
		s.Before, s.After = percentiles(before), percentiles(after)
	}
	if oos != nil {
		v := ms(*oos)
		s.FirstOOSMs = &v
	}
	s.Confirmed, s.Released = h.Settled()
	if s.Sent > 0 && (s.SendLateP99Ms > ms(GeneratorLateness) || s.OfferedRate < 0.9*s.Rate) {
		s.GeneratorLate = true
		s.Warnings = append(s.Warnings, fmt.Sprintf("the generator ran late: it sent at %.0f/s of the %.0f/s asked, 1%% of requests more than %.2f ms after their scheduled time; "+
			"the latencies include its own delay and the target was offered less than asked (give it more CPU, or ask a lower -rate)",
			s.OfferedRate, s.Rate, s.SendLateP99Ms))
	}
	s.Requests = s.Sent
	for _, st := range append(slices.Clone(h.FollowUps), h.Resends...) {
		if st.State != NotSent {
			s.Requests++
		}
	}
	return s
}

// soldOut is when the use that emptied the voucher was granted: the answer time of the
// (uses left)-th order granted, counted by answer time.
func soldOut(h *History) (time.Duration, bool) {
	left := h.Before.TotalLimit - h.Before.UsedCount
	grants := h.Grants()
	if left <= 0 || len(grants) < left {
		return 0, false
	}
	first := map[int32]time.Duration{}
	for i, o := range h.Reservations {
		if o.State == Answered && o.Status == 201 {
			if d, ok := first[h.Plan[i].Order]; !ok || o.Done < d {
				first[h.Plan[i].Order] = o.Done
			}
		}
	}
	times := slices.Sorted(maps.Values(first))
	return times[left-1], true
}

// Print writes the summary for a terminal.
func (s Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "sale of %s at %s: %d reservations offered at %.0f/s, %d sent (at %.0f/s; 99%% left within %.2f ms of schedule), answered at %.0f/s; the generator took %.2f cores\n",
		s.Code, s.Target, s.Offered, s.Rate, s.Sent, s.OfferedRate, s.SendLateP99Ms, s.AchievedRate, s.GeneratorCores)
	for _, warning := range s.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", warning)
	}
	keys := slices.Sorted(maps.Keys(s.Answers))
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, s.Answers[k]))
	}
	fmt.Fprintf(w, "answers: %s\n", strings.Join(parts, ", "))
	if s.Repeated201 > 0 {
		fmt.Fprintf(w, "  201: %d is %d orders granted and %d retries of granted orders, answered their 201 again\n",
			s.Answers["201"], s.Granted, s.Repeated201)
	}
	l := s.Latency
	fmt.Fprintf(w, "latency from the scheduled send: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms\n",
		l.P50, l.P90, l.P99, l.P999, l.Max)
	if s.SoldOutMs != nil {
		fmt.Fprintf(w, "  due before the sell-out: p50 %.2f ms, p99 %.2f ms, max %.2f ms; due after it: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
			s.Before.P50, s.Before.P99, s.Before.Max, s.After.P50, s.After.P99, s.After.Max)
	}
	fmt.Fprintf(w, "%d granted; %s; after the sale %d confirmed, %d released\n", s.Granted, s.sellOut(), s.Confirmed, s.Released)
	fmt.Fprintf(w, "seed %d; the same traffic again: %s\n", s.Settings.Seed, s.Settings.Replay())
	fmt.Fprintln(w, s.Verdict)
}

// sellOut tells when the voucher sold out and when the first OUT_OF_STOCK came, in the order
// they happened. The first OUT_OF_STOCK may come first: once every use is taken at the gate,
// new orders are refused at once, while the last winners' 201s wait for their rows.
func (s Summary) sellOut() string {
	switch {
	case s.SoldOutMs == nil && s.FirstOOSMs == nil:
		return "not sold out"
	case s.SoldOutMs == nil:
		return fmt.Sprintf("not sold out, though the first OUT_OF_STOCK came at %.0f ms", *s.FirstOOSMs)
	case s.FirstOOSMs == nil:
		return fmt.Sprintf("sold out at %.0f ms (the last use's 201)", *s.SoldOutMs)
	case *s.FirstOOSMs < *s.SoldOutMs:
		return fmt.Sprintf("first OUT_OF_STOCK at %.0f ms, sold out at %.0f ms (the last use's 201): every use was taken by the first, the last winners answered once their rows were written",
			*s.FirstOOSMs, *s.SoldOutMs)
	}
	return fmt.Sprintf("sold out at %.0f ms (the last use's 201), first OUT_OF_STOCK at %.0f ms", *s.SoldOutMs, *s.FirstOOSMs)
}
