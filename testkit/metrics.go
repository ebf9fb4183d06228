package testkit

import (
	"bytes"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is one scrape of a /metrics endpoint: its metric families by name.
type Metrics map[string]*dto.MetricFamily

// ScrapeMetrics GETs url, a /metrics endpoint, and returns its metrics. It fails the test unless
// the answer is 200, parses as Prometheus's text format and passes the linter: `promtool check
// metrics` where promtool is installed (Debian's prometheus package), otherwise the same
// linter from client_golang (promlint, through testutil).
func ScrapeMetrics(t testing.TB, url string) Metrics {
	t.Helper()
	client := http.Client{Timeout: WaitBound}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v\n%s", url, resp.StatusCode, err, body)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("scrape %s: Content-Type %q; want Prometheus text (text/plain)", url, resp.Header.Get("Content-Type"))
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("scrape %s: not Prometheus text: %v\n%s", url, err, body)
	}
	lintMetrics(t, url, body, families)
	return families
}

// lintMetrics fails the test if the linter finds a problem in a scrape.
func lintMetrics(t testing.TB, url string, body []byte, families Metrics) {
	t.Helper()
	if promtool, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool check metrics on %s: %v\n%s", url, err, out)
		}
		return
	}
	gathered := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		fams := make([]*dto.MetricFamily, 0, len(families))
		for _, f := range families {
			fams = append(fams, f)
		}
		return fams, nil
	})
	problems, err := testutil.GatherAndLint(gathered)
	if err != nil {
		t.Fatalf("lint %s: %v", url, err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s: %s", url, p.Metric, p.Text)
	}
}

// Value returns the value of the sample of family name whose labels are exactly labels, given
// as name, value pairs (a histogram's: its count); it fails the test if the scrape has no such
// sample.
func (m Metrics) Value(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	f, ok := m[name]
	if !ok {
		t.Fatalf("no metric %s in the scrape", name)
	}
	for _, s := range f.GetMetric() {
		if !sameLabels(s.GetLabel(), labels) {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return s.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return s.GetGauge().GetValue()
		case dto.MetricType_UNTYPED:
			return s.GetUntyped().GetValue()
		case dto.MetricType_HISTOGRAM: // how many were observed
			return float64(s.GetHistogram().GetSampleCount())
		default:
			t.Fatalf("metric %s is a %s, not a single value", name, f.GetType())
		}
	}
	t.Fatalf("no sample of %s with labels %v in the scrape", name, labels)
	return 0
}

func sameLabels(have []*dto.LabelPair, want []string) bool {
	w := make(map[string]string, len(want)/2)
	for i := 0; i+1 < len(want); i += 2 {
		w[want[i]] = want[i+1]
	}
	if len(w) != len(have) {
		return false
	}
	for _, l := range have {
		if v, ok := w[l.GetName()]; !ok || v != l.GetValue() {
			return false
		}
	}
	return true
}

// Has reports whether the scrape has a sample of family name with exactly labels.
func (m Metrics) Has(name string, labels ...string) bool {
	f, ok := m[name]
	if !ok {
		return false
	}
	for _, s := range f.GetMetric() {
		if sameLabels(s.GetLabel(), labels) {
			return true
		}
	}
	return false
}

// Count returns the value of a counter's sample with exactly labels, or 0 if the scrape has
// none: a labelled counter appears only once it is first counted.
func (m Metrics) Count(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	if !m.Has(name, labels...) {
		return 0
	}
	return m.Value(t, name, labels...)
}
