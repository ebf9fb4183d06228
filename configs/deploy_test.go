// Package configs_test checks the operating files against the tools that read them:
// docker-compose.yml with docker-compose, the Prometheus config and alerts with promtool,
// Alertmanager's with amtool, the dashboard's units (dashboard_test.go), and (metrics_test.go) the dashboard's and the alerts' metric names against what a real backend and
// edge serve, scraped by a real Prometheus. A missing tool fails the test, naming its package.
package configs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
)

func TestMain(m *testing.M) {
	code := m.Run()
	backendtest.RemoveBinary() // the backend and edge commands the tests ran
	os.Exit(code)
}

// repoRoot is the repository's top folder: tests run in configs/.
const repoRoot = ".."

// tool returns the path of a binary the checks run, failing the test with the apt package
// that installs it if it is not on PATH.
func tool(t *testing.T, name, aptPackage string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed; install it with: apt-get install %s (or: bash scripts/services.sh --install)", name, aptPackage)
	}
	return path
}

// runTool runs a binary in dir and fails the test with its output unless it exits 0.
func runTool(t *testing.T, dir, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", filepath.Base(bin), strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// composeEnv is this process's environment with VG_ADMIN_TOKEN set to token, or unset when token
// is empty: the one variable docker-compose.yml requires.
func composeEnv(token string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VG_ADMIN_TOKEN=") {
			env = append(env, kv)
		}
	}
	if token != "" {
		env = append(env, "VG_ADMIN_TOKEN="+token)
	}
	return env
}

// docker-compose.yml is valid with an admin token in the environment, and refuses to run without
// one, saying which variable to set: it has no default token for anyone to know.
func TestComposeConfigIsValid(t *testing.T) {
	compose := tool(t, "docker-compose", "docker-compose")
	cmd := exec.Command(compose, "-f", "docker-compose.yml", "config", "-q")
	cmd.Dir, cmd.Env = repoRoot, composeEnv("a-token-of-the-operators-own")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker-compose config with VG_ADMIN_TOKEN set: %v\n%s", err, out)
	}

	cmd = exec.Command(compose, "-f", "docker-compose.yml", "config", "-q")
	cmd.Dir, cmd.Env = repoRoot, composeEnv("")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "VG_ADMIN_TOKEN") || !strings.Contains(string(out), "openssl rand") {
		t.Errorf("docker-compose config without VG_ADMIN_TOKEN: err %v, output %q; want a refusal naming VG_ADMIN_TOKEN and how to make one", err, out)
	}
}

// composeFile is the part of docker-compose.yml the checks below read.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Volumes     []string          `yaml:"volumes"`
		Command     any               `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
}

// The compose file's settings are the processes' real variables: a misspelt VG_ name would be
// ignored by the process, not refused.
func TestComposeSettingsAreRealVariables(t *testing.T) {
	c := readCompose(t)
	for service, settings := range map[string]any{"backend": config.Backend{}, "edge": config.Edge{}} {
		known := envNames(reflect.TypeOf(settings))
		s, ok := c.Services[service]
		if !ok {
			t.Fatalf("docker-compose.yml has no service %s", service)
		}
		for name := range s.Environment {
			if !slices.Contains(known, name) {
				t.Errorf("docker-compose.yml: %s sets %s, which the %s does not read (shared/config)", service, name, service)
			}
		}
		if s.Healthcheck == nil {
			t.Errorf("docker-compose.yml: %s has no healthcheck", service)
		}
	}
	for _, want := range []string{"VG_DATABASE_URL", "VG_REDIS_URL", "VG_NATS_URL", "VG_BACKEND_ADDR", "VG_ADMIN_TOKEN", "VG_DEMO_VOUCHER"} {
		if _, ok := c.Services["backend"].Environment[want]; !ok {
			t.Errorf("docker-compose.yml: the backend does not set %s", want)
		}
	}
	// Voucher keys must never be evicted, and a use reserved must survive a Redis restart.
	redisCmd := strings.Join(asStrings(c.Services["redis"].Command), " ")
	for _, want := range []string{"--appendonly yes", "--maxmemory-policy noeviction"} {
		if !strings.Contains(redisCmd, want) {
			t.Errorf("docker-compose.yml: redis runs %q, without %q", redisCmd, want)
		}
	}
}

// envNames lists the env tags of a settings struct.
func envNames(typ reflect.Type) []string {
	var names []string
	for i := range typ.NumField() {
		if name := typ.Field(i).Tag.Get("env"); name != "" {
			names = append(names, name)
		}
	}
	return names
}

func asStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		out := make([]string, len(v))
		for i, x := range v {
			out[i], _ = x.(string)
		}
		return out
	}
	return nil
}

// Every service is health-checked, and every image it pulls is pinned to a release: a tag with
// a version (x.y.z), not a rolling one like latest or 7-bookworm.
func TestComposeServicesAreCheckedAndPinned(t *testing.T) {
	for name, s := range readCompose(t).Services {
		if s.Healthcheck == nil || len(s.Healthcheck.Test) == 0 {
			t.Errorf("docker-compose.yml: %s has no healthcheck", name)
		}
		if s.Build == nil && !pinned.MatchString(s.Image) {
			t.Errorf("docker-compose.yml: %s runs image %q; want one pinned to a release (name:x.y.z...)", name, s.Image)
		}
	}
}

// pinned is an image reference with a release tag: x.y.z, or PostgreSQL's x.y.
var pinned = regexp.MustCompile(`^(postgres:[0-9]+\.[0-9]+|[a-z0-9./_-]+:v?[0-9]+\.[0-9]+\.[0-9]+)[a-z0-9.-]*(@sha256:[0-9a-f]{64})?$`)

// Alertmanager's config is valid (amtool), compose runs it with that config, and Prometheus
// sends its alerts to it, at the port compose gives it.
func TestAlertmanagerReceivesPrometheusAlerts(t *testing.T) {
	amtool := tool(t, "amtool", "prometheus-alertmanager")
	runTool(t, filepath.Join(repoRoot, "configs", "alertmanager"), amtool, "check-config", "alertmanager.yml")
	am, ok := readCompose(t).Services["alertmanager"]
	if !ok {
		t.Fatal("docker-compose.yml has no service alertmanager")
	}
	if !slices.ContainsFunc(am.Volumes, func(v string) bool { return strings.HasPrefix(v, "./configs/alertmanager:/etc/alertmanager") }) ||
		!slices.Contains(asStrings(am.Command), "--config.file=/etc/alertmanager/alertmanager.yml") {
		t.Errorf("docker-compose.yml: alertmanager mounts %v and runs %v; want configs/alertmanager/alertmanager.yml as its config", am.Volumes, am.Command)
	}
	raw, err := os.ReadFile(filepath.Join("prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Alerting struct {
			Alertmanagers []struct {
				StaticConfigs []struct {
					Targets []string `yaml:"targets"`
				} `yaml:"static_configs"`
			} `yaml:"alertmanagers"`
		} `yaml:"alerting"`
	}
	if err := yaml.Unmarshal(raw, &conf); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	a := conf.Alerting.Alertmanagers
	if len(a) != 1 || len(a[0].StaticConfigs) != 1 || !slices.Equal(a[0].StaticConfigs[0].Targets, []string{"alertmanager:9093"}) {
		t.Errorf("prometheus.yml sends alerts to %+v; want alertmanager:9093, compose's alertmanager", a)
	}
	if !slices.Contains(am.Ports, "127.0.0.1:9093:9093") {
		t.Errorf("docker-compose.yml publishes alertmanager on %v; want 127.0.0.1:9093:9093", am.Ports)
	}
}

func TestPrometheusConfigAndAlerts(t *testing.T) {
	promtool := tool(t, "promtool", "prometheus")
	dir := filepath.Join(repoRoot, "configs", "prometheus")
	// check config resolves rule_files relative to the config's folder, and checks them too
	runTool(t, dir, promtool, "check", "config", "prometheus.yml")
	runTool(t, dir, promtool, "check", "rules", "alerts.yml")
	// the rules' unit tests: each alert fires on a series that should page, not on one that should not
	runTool(t, dir, promtool, "test", "rules", "alerts_test.yml")
}

// Every alert has a for, a severity and both annotations.
func TestAlertsAreComplete(t *testing.T) {
	for _, r := range alertRules(t) {
		if r.For == "" {
			t.Errorf("alert %s has no for", r.Alert)
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("alert %s has severity %q; want critical or warning", r.Alert, s)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("alert %s lacks a summary or a description", r.Alert)
		}
	}
}

type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// alertRules reads configs/prometheus/alerts.yml.
func alertRules(t *testing.T) []alertRule {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	var rules []alertRule
	for _, g := range file.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("alerts.yml has no rules")
	}
	return rules
}

// No Docker engine runs the tests, so the Dockerfile is only read: it has the two targets
// docker-compose.yml builds, and every final image runs as a non-root user with the wget
// compose's health checks call.
func TestDockerfileTargets(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && strings.EqualFold(f[0], "FROM") && strings.EqualFold(f[2], "AS") {
			stages[f[3]] = true
		}
	}
	for _, target := range []string{"backend", "edge"} {
		if !stages[target] {
			t.Errorf("Dockerfile has no stage %s, which docker-compose.yml builds", target)
		}
	}
	for _, want := range []string{
		`CGO_ENABLED=0`, `-trimpath -ldflags "-s -w"`, "USER nonroot", "/usr/local/bin/wget",
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// Debian's docker.io 20.10 under docker-compose 1.29 builds without BuildKit, whose classic
	// builder refuses a syntax line, heredocs and these flags; and every base but distroless (no
	// release tags) is pinned to a release
	for i, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "# syntax="), !strings.HasPrefix(line, "#") && buildKitOnly.MatchString(line):
			t.Errorf("Dockerfile line %d needs BuildKit: %s", i+1, line)
		case len(f) >= 2 && strings.EqualFold(f[0], "FROM") && !stages[f[1]] && !strings.Contains(f[1], "${") &&
			!strings.HasPrefix(f[1], "gcr.io/distroless/") && !pinned.MatchString(f[1]):
			t.Errorf("Dockerfile line %d: %s is not pinned to a release", i+1, f[1])
		}
	}
	compose, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(compose), `"/usr/local/bin/wget"`) {
		t.Error("docker-compose.yml's health checks do not call the wget the Dockerfile adds")
	}
}

// buildKitOnly matches what only BuildKit reads in a Dockerfile instruction: its flags of RUN,
// COPY and ADD, and heredocs.
var buildKitOnly = regexp.MustCompile(`--(mount|network|security|link|chmod|checksum|parents|exclude)\b|<<`)

// The Dockerfile builds with the Go go.mod names: the golang image it pins is that release, so
// the build neither fetches another toolchain nor lags behind the one the tests ran with.
func TestDockerfileBuildsWithGoModsGo(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	release := func(re string, in []byte) string {
		if m := regexp.MustCompile(re).FindSubmatch(in); m != nil {
			return string(m[1])
		}
		return ""
	}
	image, module := release(`(?m)^ARG GO_VERSION=(\S+)$`, raw), release(`(?m)^go (\S+)$`, mod)
	if image == "" || image != module {
		t.Errorf("Dockerfile's ARG GO_VERSION is %q, go.mod's go %q; want the same release", image, module)
	}
	if !strings.Contains(string(raw), "FROM golang:${GO_VERSION}-bookworm AS build") {
		t.Error("Dockerfile does not build FROM golang:${GO_VERSION}-bookworm")
	}
}

// readCompose reads docker-compose.yml.
func readCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

// Only the edge's public port is published on every interface: the backend (its admin API,
// its /metrics) is not published at all, and the edge's ops listener, Prometheus and Grafana
// only on 127.0.0.1. The admin token comes from the environment, with no default.
func TestComposePublishesOnlyTheEdge(t *testing.T) {
	c := readCompose(t)
	edgePort := portOf(t, c.Services["edge"].Environment["VG_EDGE_ADDR"])
	for name, s := range c.Services {
		for _, p := range s.Ports {
			parts := strings.Split(p, ":")
			switch {
			case name == "edge" && len(parts) == 2 && parts[0] == edgePort && parts[1] == edgePort:
			case len(parts) == 3 && parts[0] == "127.0.0.1":
			default:
				t.Errorf("docker-compose.yml: %s publishes %q; only the edge's %s may be published on every interface, anything else on 127.0.0.1:", name, p, edgePort)
			}
		}
	}
	if ports := c.Services["backend"].Ports; len(ports) != 0 {
		t.Errorf("docker-compose.yml publishes the backend on %v; the edge is its only way in", ports)
	}
	if tok := c.Services["backend"].Environment["VG_ADMIN_TOKEN"]; !strings.HasPrefix(tok, "${VG_ADMIN_TOKEN:?") {
		t.Errorf("docker-compose.yml: the backend's VG_ADMIN_TOKEN is %q; want ${VG_ADMIN_TOKEN:?...}: required, no default", tok)
	}
}

// The edge published on every interface keeps a per-address cap: with VG_EDGE_MAX_CONNS_PER_IP
// at 0, a few addresses holding connections open could take every one of the edge's.
func TestComposeKeepsAPerAddressCapOnThePublishedEdge(t *testing.T) {
	c := readCompose(t)
	env := c.Services["edge"].Environment
	if len(c.Services["edge"].Ports) == 0 {
		t.Fatal("docker-compose.yml does not publish the edge; this check reads its settings")
	}
	v, ok := env["VG_EDGE_MAX_CONNS_PER_IP"]
	n, err := strconv.Atoi(v)
	if !ok || err != nil || n <= 0 {
		t.Errorf("docker-compose.yml: the published edge's VG_EDGE_MAX_CONNS_PER_IP is %q (set: %v); want a number above 0, a cap per client address", v, ok)
	}
}

// Prometheus scrapes each process on its ops listener, the one place it serves /metrics: the
// port of each target is the port its compose service gives VG_BACKEND_OPS_ADDR or
// VG_EDGE_OPS_ADDR.
func TestPrometheusScrapesTheOpsListeners(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		ScrapeConfigs []struct {
			Job           string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(raw, &conf); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	c := readCompose(t)
	want := map[string]string{
		"backend": "backend:" + portOf(t, c.Services["backend"].Environment["VG_BACKEND_OPS_ADDR"]),
		"edge":    "edge:" + portOf(t, c.Services["edge"].Environment["VG_EDGE_OPS_ADDR"]),
	}
	for _, sc := range conf.ScrapeConfigs {
		w, ok := want[sc.Job]
		if !ok {
			continue
		}
		delete(want, sc.Job)
		if len(sc.StaticConfigs) != 1 || !slices.Equal(sc.StaticConfigs[0].Targets, []string{w}) {
			t.Errorf("prometheus.yml: job %s scrapes %+v; want [%s], its ops listener", sc.Job, sc.StaticConfigs, w)
		}
	}
	for job := range want {
		t.Errorf("prometheus.yml has no job %s", job)
	}
}

// portOf is the port of host:port, failing the test for anything else.
func portOf(t *testing.T, addr string) string {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	if i < 0 || i == len(addr)-1 {
		t.Fatalf("docker-compose.yml: %q is no host:port", addr)
	}
	return addr[i+1:]
}
