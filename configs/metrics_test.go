package configs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// eventMetrics are labelled series the dashboard and the alerts use that a process serves only
// once what they count has happened, which a short clean sale does not make happen: a
// compensation, a failed Redis or PostgreSQL call, a reconciliation (the sale's progress
// gauges); or only with a setting the sale runs without (service API keys). Each must still be
// in the README's Metrics table.
var eventMetrics = []string{
	"vouchergate_compensations_total",
	"vouchergate_redis_command_errors_total",
	"vouchergate_postgres_query_errors_total",
	"vouchergate_voucher_uses_left",
	"vouchergate_redis_drift",
	"vouchergate_voucher_total_limit",
	"vouchergate_api_keys_stale",       // with VG_API_KEYS_FILE
	"vouchergate_quota_degraded_total", // once a business line is set to whenUnavailable OPEN
	"vouchergate_quota_unruled_total",  // once a deduct meets no rule
}

// exporterMetrics are redis_exporter's (oliver006/redis_exporter, Debian's
// prometheus-redis-exporter), which no process of ours serves: the test runs Debian's exporter
// against a Redis of its own and waits for each in Prometheus.
var exporterMetrics = []string{
	"redis_memory_used_bytes",
	"redis_memory_max_bytes",
	"redis_commands_duration_seconds_total",
	"redis_commands_total",
}

// metricName finds the metric names in a PromQL expression: ours, the exporter's and the Go
// collectors' all start with one of these prefixes, which no function or label name does.
var metricName = regexp.MustCompile(`\b(?:vouchergate|vg_edge|redis|go|process)_[a-z0-9_]*[a-z0-9]\b`)

// The processes, a short sale through the edge, and a real Prometheus scraping both: the
// dashboard's and the alerts' names are checked against what they serve, and the dashboard's
// expressions are run by that Prometheus.
func TestDashboardAndAlertsAgainstRunningProcesses(t *testing.T) {
	prometheus := tool(t, "prometheus", "prometheus")
	tool(t, "promtool", "prometheus") // testkit.ScrapeMetrics lints with it
	exporter := tool(t, "prometheus-redis-exporter", "prometheus-redis-exporter")
	s := startStack(t)
	exporterAddr := startRedisExporter(t, exporter)
	backendLogBefore, edgeLogBefore := len(s.backend.Output()), len(s.edge.Output())
	code, answers := s.sale(t, 20, 50)

	backendMetrics := testkit.ScrapeMetrics(t, s.backend.OpsURL()+"/metrics")
	edgeMetrics := testkit.ScrapeMetrics(t, "http://"+s.edgeOps+"/metrics")

	served := map[string]bool{}
	for _, m := range []testkit.Metrics{backendMetrics, edgeMetrics} {
		for name := range m {
			served[name] = true
		}
	}
	readme := readmeMetrics(t)
	exprs := dashboardExprs(t)
	for _, r := range alertRules(t) {
		exprs = append(exprs, r.Expr)
	}

	t.Run("names", func(t *testing.T) {
		// the dashboard's unit check (dashboard_test.go) reads a metric's type from its name
		for _, m := range []testkit.Metrics{backendMetrics, edgeMetrics} {
			for _, name := range usedNames(exprs) {
				if f, ok := m[name]; ok {
					counter := f.GetType() == dto.MetricType_COUNTER
					if counter != strings.HasSuffix(name, "_total") {
						t.Errorf("%s is a %s: its name and its type disagree (a counter's name, and only a counter's, ends in _total)", name, f.GetType())
					}
				}
			}
		}
		for _, name := range usedNames(exprs) {
			switch {
			case served[name], slices.Contains(exporterMetrics, name):
			case slices.Contains(eventMetrics, name) && slices.Contains(readme, name):
				t.Logf("%s: served once what it counts happens", name)
			default:
				t.Errorf("the dashboard or the alerts use %s, which neither process serves (nor, counting an event, lists in the README's Metrics table)", name)
			}
		}
	})

	prom := startPrometheus(t, prometheus, map[string]string{
		"backend": s.backend.OpsAddr(), "edge": s.edgeOps, "redis": exporterAddr})

	t.Run("scraped", func(t *testing.T) {
		queries := []string{
			`vouchergate_http_requests_total{job="backend",route="reserve"}`,
			`vouchergate_http_request_duration_seconds_bucket{job="backend",route="reserve"}`,
			`vg_edge_requests_total{job="edge",route="reserve"}`,
			`vg_edge_request_duration_seconds_bucket{job="edge",route="reserve"}`,
			`vg_edge_answers_total{job="edge",route="reserve",code="OUT_OF_STOCK"}`,
		}
		for _, name := range exporterMetrics {
			queries = append(queries, name+`{job="redis"}`)
		}
		for _, q := range queries {
			prom.waitForSeries(t, q)
		}
		// the backend granted exactly the voucher's uses, and Prometheus saw the same count
		prom.waitForValue(t, `sum(vouchergate_http_requests_total{route="reserve",status="201"})`, 20)
		// The backend's reservations by outcome code are what the sale was answered, less the
		// 409s the edge gave from memory (which never reached the backend).
		fromMemory := edgeMetrics.Value(t, "vg_edge_soldout_answers_total")
		want := map[string]float64{}
		for a, n := range answers {
			want[a.code] += float64(n)
		}
		want["OUT_OF_STOCK"] -= fromMemory
		if want["OUT_OF_STOCK"] == 0 {
			delete(want, "OUT_OF_STOCK") // the edge learned before the backend refused anyone: no series
		}
		prom.waitForValues(t, `sum by (code) (vouchergate_http_requests_total{job="backend",route="reserve"})`, "code", want)
	})

	t.Run("logs", func(t *testing.T) {
		// One line per significant event, none per request: the sale's 50 requests may log the
		// sell-out and little else. The sold-out line is the notifier's, written after the
		// answers: wait for it, then it must be the only one for the voucher.
		soldOut := `msg="voucher sold out; edges told" code=` + code + " "
		testkit.Eventually(t, "the backend logs "+code+"'s sell-out", func() bool {
			return strings.Contains(s.backend.Output(), soldOut)
		})
		backendLog, edgeLog := s.backend.Output()[backendLogBefore:], s.edge.Output()[edgeLogBefore:]
		if n := strings.Count(backendLog, soldOut); n != 1 {
			t.Errorf("the backend logged %s's sell-out %d times; want once:\n%s", code, n, backendLog)
		}
		const most = 3 // the voucher made available, its sell-out, and one more event at most
		for name, log := range map[string]string{"backend": backendLog, "edge": edgeLog} {
			if n := strings.Count(log, "level=INFO"); n > most {
				t.Errorf("the %s logged %d INFO lines during a sale of 50 requests; want at most %d (no line per request):\n%s",
					name, n, most, log)
			}
		}
	})

	t.Run("dashboard expressions run", func(t *testing.T) {
		for _, e := range dashboardExprs(t) {
			prom.query(t, strings.ReplaceAll(e, "$code", ".*")) // fails on a PromQL error
		}
	})

	t.Run("alert rules loaded", func(t *testing.T) {
		var rules struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name      string `json:"name"`
						Health    string `json:"health"`
						LastError string `json:"lastError"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		prom.get(t, "/api/v1/rules", &rules)
		n := 0
		for _, g := range rules.Data.Groups {
			for _, r := range g.Rules {
				n++
				if r.Health == "err" {
					t.Errorf("rule %s: %s", r.Name, r.LastError)
				}
			}
		}
		if want := len(alertRules(t)); n != want {
			t.Errorf("Prometheus loaded %d rules; alerts.yml has %d", n, want)
		}
	})
}

// usedNames returns the metric names in exprs, each once, histogram series (_bucket, _sum,
// _count) under their family's name.
func usedNames(exprs []string) []string {
	var names []string
	for _, e := range exprs {
		for _, name := range metricName.FindAllString(e, -1) {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok {
					name = base
				}
			}
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// dashboardExprs returns every panel's query in configs/grafana/vouchergate.json.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("grafana", "vouchergate.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("vouchergate.json: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

// readmeMetrics returns the names in the README's Metrics table, labels taken off.
func readmeMetrics(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "| backend |") && !strings.HasPrefix(line, "| edge |") {
			continue
		}
		cells := strings.Split(line, "|")
		names = append(names, metricName.FindAllString(cells[2], -1)...)
	}
	if len(names) == 0 {
		t.Fatal("README.md: no metric in the Metrics table")
	}
	return names
}

// stack is a backend and an edge run as commands, isolated on the shared servers.
type stack struct {
	backend *backendtest.Process
	edge    *backendtest.Process
	edgeOps string // ops listener: /metrics, /readyz in full
}

func startStack(t *testing.T) *stack {
	t.Helper()
	cfg := backendtest.Config(t) // its own database, key prefix and subject prefix
	s := &stack{backend: backendtest.StartProcess(t, cfg), edgeOps: freeAddr(t)}
	s.edge = backendtest.StartEdgeProcess(t, cfg, s.backend.Addr(), "VG_EDGE_OPS_ADDR="+s.edgeOps)
	// the ops /readyz is 200 once the edge has the backend in service
	testkit.Eventually(t, "the edge is ready with the backend in service", func() bool {
		return getStatus("http://"+s.edgeOps+"/readyz") == http.StatusOK
	})
	return s
}

// answer is a status and the outcome code of its body (OK for a 2xx).
type answer struct {
	status int
	code   string
}

// sale creates a flash voucher of uses uses through the admin API and sends requests
// reservations through the edge, each from its own customer; exactly uses are granted, and
// the rest answered 409 OUT_OF_STOCK (from the backend, then from the edge's memory once it
// learns). It returns the voucher's code and the answers counted.
func (s *stack) sale(t *testing.T, uses, requests int) (string, map[answer]int) {
	t.Helper()
	code := strings.ToUpper(testkit.Name("FLASH"))
	now := time.Now().UTC()
	body, _ := json.Marshal(map[string]any{
		"code": code, "discountAmount": 100, "minOrderAmount": 0, "totalLimit": uses, "perUserLimit": 1,
		"startsAt": now.Add(-time.Minute), "endsAt": now.Add(time.Hour), "flashSale": true,
	})
	req, _ := http.NewRequest("POST", s.backend.URL()+"/admin/vouchers", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+backendtest.Token)
	req.Header.Set("Content-Type", "application/json")
	if status, answer := do(t, req); status != http.StatusCreated {
		t.Fatalf("create voucher %s: %d %s", code, status, answer)
	}
	answers := map[answer]int{}
	for i := range requests {
		body := fmt.Sprintf(`{"customerId":"c-%d","orderId":"o-%d","orderAmount":1000}`, i, i)
		req, _ := http.NewRequest("POST", s.edge.URL()+"/vouchers/"+code+"/reservations", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		status, raw := do(t, req)
		a := answer{status: status, code: "OK"}
		if status >= 300 {
			var e struct{ Error string }
			_ = json.Unmarshal(raw, &e)
			a.code = e.Error
		}
		answers[a]++
	}
	granted, refused := answer{http.StatusCreated, "OK"}, answer{http.StatusConflict, "OUT_OF_STOCK"}
	if answers[granted] != uses || answers[refused] != requests-uses {
		t.Fatalf("sale of %d uses, %d reservations: answers %v; want %d 201 and %d 409 OUT_OF_STOCK", uses, requests, answers, uses, requests-uses)
	}
	return code, answers
}

var client = &http.Client{Timeout: 10 * time.Second}

func do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func getStatus(url string) int {
	resp, err := client.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// prometheusServer is Debian's prometheus run on a free port with a generated config.
type prometheusServer struct{ url string }

// promWait bounds each wait for Prometheus: it scrapes every second.
const promWait = 20 * time.Second

// startPrometheus runs bin scraping each job's target (job name: host:port) every second, with
// alerts.yml loaded, and returns once it is ready.
func startPrometheus(t *testing.T, bin string, targets map[string]string) *prometheusServer {
	t.Helper()
	dir := t.TempDir()
	alerts, err := filepath.Abs(filepath.Join("prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [%q]\nscrape_configs:\n", alerts)
	for job, target := range targets {
		conf += fmt.Sprintf("  - job_name: %s\n    static_configs: [{targets: [%q]}]\n", job, target)
	}
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	startChild(t, "prometheus", os.Environ(), bin,
		"--config.file="+confPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	p := &prometheusServer{url: "http://" + addr}
	waitUntil(t, "Prometheus is ready", func() bool { return getStatus(p.url+"/-/ready") == http.StatusOK })
	return p
}

// startRedisExporter runs Debian's redis_exporter against a Redis of the test's own and
// returns its address once it answers /metrics.
func startRedisExporter(t *testing.T, bin string) string {
	t.Helper()
	redis := testkit.StartRedis(t)
	addr := freeAddr(t)
	startChild(t, "redis_exporter", os.Environ(), bin,
		"-redis.addr", "redis://"+redis.Addr(), "-web.listen-address", addr)
	waitUntil(t, "redis_exporter answers /metrics", func() bool {
		return getStatus("http://"+addr+"/metrics") == http.StatusOK
	})
	return addr
}

// queryResult is /api/v1/query's answer to an instant query.
type queryResult struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

// query runs an instant query and fails the test if Prometheus refuses it.
func (p *prometheusServer) query(t *testing.T, q string) queryResult {
	t.Helper()
	var r queryResult
	p.get(t, "/api/v1/query?query="+url.QueryEscape(q), &r)
	if r.Status != "success" {
		t.Fatalf("query %s: %s %s", q, r.Status, r.Error)
	}
	return r
}

func (p *prometheusServer) get(t *testing.T, path string, into any) {
	t.Helper()
	resp, err := client.Get(p.url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("GET %s: %d, not JSON: %v", path, resp.StatusCode, err)
	}
}

// waitForSeries polls q until it has a series.
func (p *prometheusServer) waitForSeries(t *testing.T, q string) {
	t.Helper()
	waitUntil(t, "Prometheus has a series for "+q, func() bool { return len(p.query(t, q).Data.Result) > 0 })
}

// waitForValue polls q, an expression of one series, until its value is want.
func (p *prometheusServer) waitForValue(t *testing.T, q string, want float64) {
	t.Helper()
	var last string
	waitUntil(t, fmt.Sprintf("Prometheus answers %v to %s", want, q), func() bool {
		r := p.query(t, q)
		if len(r.Data.Result) != 1 {
			return false
		}
		last, _ = r.Data.Result[0].Value[1].(string)
		return last == fmt.Sprint(want)
	})
}

// waitForValues polls q, an expression of series told apart by label, until their values by
// that label are want.
func (p *prometheusServer) waitForValues(t *testing.T, q, label string, want map[string]float64) {
	t.Helper()
	got := map[string]float64{}
	waitUntil(t, fmt.Sprintf("Prometheus answers %v by %s to %s", want, label, q), func() bool {
		clear(got)
		for _, r := range p.query(t, q).Data.Result {
			v, _ := r.Value[1].(string)
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("query %s: value %q: %v", q, v, err)
			}
			got[r.Metric[label]] = f
		}
		return maps.Equal(got, want)
	})
}

// waitUntil polls cond every 100 ms, failing the test after promWait.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(promWait); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after %v: %s", promWait, what)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
