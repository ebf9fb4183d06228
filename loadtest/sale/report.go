package sale

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

//go:embed report.html.tmpl
var reportHTML string

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"deref":   func(p *float64) float64 { return *p },
	"legendX": func(i int) int { return 70 + 150*i },
	"row":     func(name string, p Percentiles) percentileRow { return percentileRow{name, p} },
	"colour": func(answers map[string]int, k string) string {
		return answerColours(slices.Collect(maps.Keys(answers)))[k]
	},
}).Parse(reportHTML))

// percentileRow is one line of the report's latency table.
type percentileRow struct {
	Name string
	P    Percentiles
}

// WriteReport writes h's report as one HTML page that needs nothing else: latency
// percentiles over time, answers per second by kind, the moment the voucher sold out and
// the verdict, the charts drawn as inline SVG.
func WriteReport(w io.Writer, h *History, s Summary) error {
	tl := newTimeline(h)
	data := struct {
		S        Summary
		Started  string
		Latency  chart
		Answers  chart
		Bucket   string
		Verdict  Verdict
		Passed   bool
		Settings []setting
		Replay   string
	}{S: s, Started: h.Started.UTC().Format(time.RFC3339), Latency: tl.latencyChart(), Answers: tl.answersChart(),
		Bucket: tl.width.String(), Verdict: s.Verdict, Passed: s.Verdict.Pass, Settings: settingsRows(s.Settings),
		Replay: s.Settings.Replay()}
	if err := reportTemplate.Execute(w, data); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	return nil
}

// timeline is the sale cut into buckets of equal width.
type timeline struct {
	width   time.Duration
	buckets int
	latency [][]Outcome          // by scheduled time
	answers map[string][]float64 // per second, by answer time
	soldOut *time.Duration
}

// bucketWidths are the widths a timeline may use: the smallest giving at most 120 buckets.
var bucketWidths = []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second,
	5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute}

func newTimeline(h *History) timeline {
	var end time.Duration
	for _, o := range h.Reservations {
		end = max(end, o.Done, o.Scheduled)
	}
	t := timeline{width: bucketWidths[len(bucketWidths)-1], answers: map[string][]float64{}}
	for _, w := range bucketWidths {
		if end/w < 120 {
			t.width = w
			break
		}
	}
	t.buckets = int(end/t.width) + 1
	t.latency = make([][]Outcome, t.buckets)
	for _, o := range h.Reservations {
		if o.State == NotSent {
			continue
		}
		if o.State == Answered {
			b := int(o.Scheduled / t.width)
			t.latency[b] = append(t.latency[b], o)
		}
		k := o.Key()
		if t.answers[k] == nil {
			t.answers[k] = make([]float64, t.buckets)
		}
		t.answers[k][int(o.Done/t.width)] += 1 / t.width.Seconds()
	}
	if at, ok := soldOut(h); ok {
		t.soldOut = &at
	}
	return t
}

// chart is one SVG line chart, laid out for the template.
type chart struct {
	Title          string
	W, H           int
	Left, Top      int
	Right, Bottom  int
	Lines          []line
	XTicks, YTicks []tick
	Marker         *tick // the sell-out
}

type line struct {
	Name, Colour, Points string
}

type tick struct {
	At    float64
	Label string
}

// palette colours the latency lines, which are ordered (p50 to max).
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf"}

// answerShades colour the kinds of answer by what they mean, whatever kinds a run had: a grant
// green, a sold-out refusal grey, the other refusals (409, 422) neutral blues and purples, a 503
// red, another 5xx or a request that got no answer dark reds and oranges, a client error (4xx)
// magenta. Kinds of one meaning take its shades in turn.
var answerShades = []struct {
	meaning func(kind string) bool
	shades  []string
}{
	{func(k string) bool { return k == "201" || strings.HasPrefix(k, "200") }, []string{"#2ca02c", "#98df8a"}},
	{func(k string) bool { return k == "409 OUT_OF_STOCK" }, []string{"#7f7f7f"}},
	{func(k string) bool { return strings.HasPrefix(k, "409") || strings.HasPrefix(k, "422") },
		[]string{"#1f77b4", "#9467bd", "#17becf", "#aec7e8", "#c5b0d5"}},
	{func(k string) bool { return strings.HasPrefix(k, "503") }, []string{"#d62728", "#ff9896"}},
	{func(k string) bool { return strings.HasPrefix(k, "5") }, []string{"#8c0a0a", "#b85450"}},
	{func(k string) bool { return strings.HasPrefix(k, "failed: ") }, []string{"#ff7f0e", "#d9590b", "#ffbb78"}},
	{func(k string) bool { return strings.HasPrefix(k, "4") }, []string{"#e377c2", "#c51b8a", "#f7b6d2"}},
	{func(string) bool { return true }, []string{"#bcbd22", "#8c564b", "#c7c7c7"}}, // not sent, anything else
}

// answerColours gives each kind of answer its colour by meaning.
func answerColours(kinds []string) map[string]string {
	slices.Sort(kinds)
	out := make(map[string]string, len(kinds))
	used := make([]int, len(answerShades))
	for _, k := range kinds {
		for i, m := range answerShades {
			if m.meaning(k) {
				out[k] = m.shades[used[i]%len(m.shades)]
				used[i]++
				break
			}
		}
	}
	return out
}

// setting is one line of the report's table of settings.
type setting struct{ Name, Value string }

func settingsRows(p Parameters) []setting {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	count := p.Duration
	if p.Requests > 0 {
		count = strconv.Itoa(p.Requests) + " requests"
	}
	return []setting{
		{"target", p.Target}, {"admin", p.Admin}, {"code", p.Code},
		{"create", fmt.Sprintf("%v (uses %d, per customer %d, discount %d)", p.Create, p.Uses, p.PerCustomer, p.Discount)},
		{"order amount", strconv.FormatInt(p.OrderAmount, 10)}, {"rate", f(p.Rate) + "/s"}, {"for", count},
		{"connections", strconv.Itoa(p.Connections)}, {"customers", strconv.Itoa(p.Customers)},
		{"retry share", f(p.RetryShare)}, {"second-order share", f(p.SecondOrderShare)},
		{"confirm share", f(p.ConfirmShare)}, {"release share", f(p.ReleaseShare)},
		{"503 tolerated", strconv.FormatBool(p.Tolerate503)}, {"timeout", p.Timeout}, {"latency goal (p99)", p.MaxP99},
		{"seed", strconv.FormatUint(p.Seed, 10)}, {"orderId prefix", p.OrderPrefix},
	}
}

func (t timeline) frame(title string) chart {
	c := chart{Title: title, W: 960, H: 300, Left: 70, Top: 20, Right: 940, Bottom: 260}
	for i := 0; i <= 5; i++ {
		at := time.Duration(float64(t.buckets) * float64(t.width) * float64(i) / 5)
		c.XTicks = append(c.XTicks, tick{At: c.x(t, at), Label: fmt.Sprintf("%.2g s", at.Seconds())})
	}
	if t.soldOut != nil {
		c.Marker = &tick{At: c.x(t, *t.soldOut), Label: fmt.Sprintf("sold out at %.0f ms", ms(*t.soldOut))}
	}
	return c
}

func (c chart) x(t timeline, at time.Duration) float64 {
	return float64(c.Left) + float64(c.Right-c.Left)*float64(at)/(float64(t.buckets)*float64(t.width))
}

// latencyChart draws p50, p90, p99 and max per bucket on a log scale of milliseconds.
func (t timeline) latencyChart() chart {
	c := t.frame("Latency from the scheduled send, by when the request was due (log scale)")
	qs := []struct {
		name string
		q    float64
	}{{"p50", 50}, {"p90", 90}, {"p99", 99}, {"max", 100}}
	values := make([][]float64, len(qs))
	top := 1.0
	for b, os := range t.latency {
		if len(os) == 0 {
			continue
		}
		p := percentiles(os)
		for i, v := range []float64{p.P50, p.P90, p.P99, p.Max} {
			values[i] = append(values[i], float64(b), v)
			top = max(top, v)
		}
	}
	lo, hi := -1.0, math.Ceil(math.Log10(top)) // 0.1 ms to the decade above the slowest
	y := func(v float64) float64 {
		l := math.Log10(max(v, 0.1))
		return float64(c.Bottom) - float64(c.Bottom-c.Top)*(l-lo)/(hi-lo)
	}
	for d := lo; d <= hi; d++ {
		c.YTicks = append(c.YTicks, tick{At: y(math.Pow(10, d)), Label: fmt.Sprintf("%g ms", math.Pow(10, d))})
	}
	for i, q := range qs {
		c.Lines = append(c.Lines, line{Name: q.name, Colour: palette[i], Points: t.points(c, values[i], y)})
	}
	return c
}

// answersChart draws answers per second of each kind, on a linear scale.
func (t timeline) answersChart() chart {
	c := t.frame("Answers per second by kind, by when they came back")
	top := 1.0
	for _, per := range t.answers {
		top = max(top, slices.Max(per))
	}
	step := math.Pow(10, math.Floor(math.Log10(top)))
	for top/step < 4 {
		step /= 2
	}
	hi := math.Ceil(top/step) * step
	y := func(v float64) float64 { return float64(c.Bottom) - float64(c.Bottom-c.Top)*v/hi }
	for v := 0.0; v <= hi; v += step {
		c.YTicks = append(c.YTicks, tick{At: y(v), Label: fmt.Sprintf("%.0f/s", v)})
	}
	colours := answerColours(slices.Collect(maps.Keys(t.answers)))
	for _, k := range slices.Sorted(maps.Keys(t.answers)) {
		var xy []float64
		for b, v := range t.answers[k] {
			xy = append(xy, float64(b), v)
		}
		c.Lines = append(c.Lines, line{Name: k, Colour: colours[k], Points: t.points(c, xy, y)})
	}
	return c
}

// points lays out (bucket, value) pairs, each at its bucket's middle.
func (t timeline) points(c chart, xy []float64, y func(float64) float64) string {
	var b strings.Builder
	for i := 0; i+1 < len(xy); i += 2 {
		at := time.Duration((xy[i] + 0.5) * float64(t.width))
		fmt.Fprintf(&b, "%.1f,%.1f ", c.x(t, at), y(xy[i+1]))
	}
	return strings.TrimSpace(b.String())
}
