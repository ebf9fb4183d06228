package testkit

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
)

// scrape runs ScrapeMetrics on a server answering text, and returns what it reported.
func scrape(t *testing.T, text string) (Metrics, []string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, text)
	}))
	defer srv.Close()
	var m Metrics
	said := Failed(t, func(t testing.TB) { m = ScrapeMetrics(t, srv.URL) })
	return m, said
}

// ScrapeMetrics lints with promtool where it is installed and with promlint where it is not;
// both refuse a counter without _total, and a clean scrape reads back by name and labels.
func TestScrapeMetricsLints(t *testing.T) {
	const good = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 3\n"
	const bad = "# HELP a A.\n# TYPE a counter\na 3\n"
	for _, linter := range []string{"promtool", "promlint"} {
		t.Run(linter, func(t *testing.T) {
			if linter == "promtool" {
				if _, err := exec.LookPath("promtool"); err != nil {
					t.Skip("promtool is not installed")
				}
			} else {
				t.Setenv("PATH", "") // no promtool: the fallback
			}
			m, said := scrape(t, good)
			if len(said) != 0 {
				t.Fatalf("a clean scrape reported %q", said)
			}
			if v := m.Value(t, "a_total", "x", "1"); v != 3 {
				t.Fatalf("a_total{x=1} is %v; want 3", v)
			}
			if _, said := scrape(t, bad); len(said) == 0 {
				t.Fatal("a counter without _total passed the linter")
			}
		})
	}
}
