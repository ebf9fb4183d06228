package api_test

import (
	"io"
	"net/http"
	osexec "os/exec"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
	"vouchergate/testkit"
)

// get answers GET url with its status and body; 0 when nothing answered.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: testkit.WaitBound}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The backend command serves /metrics, which lists every flash voucher with its limit and uses
// left, on its ops listener only: the public port answers 404 there. /healthz and /readyz are
// on both, as on the edge: health checks and load balancers ask the public port.
func TestBackendMetricsOnlyOnTheOpsListener(t *testing.T) {
	cfg := backendtest.Config(t)
	p := backendtest.StartProcess(t, cfg)
	if st, body := get(t, p.URL()+"/metrics"); st != 404 || !strings.Contains(body, `"NOT_FOUND"`) {
		t.Errorf("public /metrics: %d %.200s; want 404 NOT_FOUND", st, body)
	}
	m := testkit.ScrapeMetrics(t, p.OpsURL()+"/metrics")
	if m.Value(t, "go_goroutines") <= 0 {
		t.Errorf("ops /metrics has no go_goroutines")
	}
	for _, url := range []string{p.URL(), p.OpsURL()} {
		for _, path := range []string{"/healthz", "/readyz"} {
			if st, body := get(t, url+path); st != 200 {
				t.Errorf("%s%s: %d %s; want 200", url, path, st, body)
			}
		}
	}
	if st, _ := get(t, p.OpsURL()+"/vouchers/NONE/state"); st != 404 {
		t.Errorf("ops listener, a public path: %d; want 404 (it serves the ops paths only)", st)
	}
	resp, err := http.Post(p.OpsURL()+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("POST ops /metrics: %d; want 405", resp.StatusCode)
	}
}

// VG_BACKEND_OPS_ADDR=off runs no ops listener (and no /metrics anywhere); a value that is no
// host:port stops the command at start with an error naming the variable and the forms it takes.
func TestBackendOpsListenerOffAndBadAddress(t *testing.T) {
	cfg := backendtest.Config(t)
	p := backendtest.StartProcess(t, cfg, "VG_BACKEND_OPS_ADDR="+config.OpsOff)
	if st, _ := get(t, p.URL()+"/metrics"); st != 404 {
		t.Errorf("public /metrics with the ops listener off: %d; want 404", st)
	}
	if st, _ := get(t, p.OpsURL()+"/healthz"); st != 0 {
		t.Errorf("the ops address answered %d with VG_BACKEND_OPS_ADDR=off; want nothing listening", st)
	}

	cmd := osexec.Command(backendtest.Binary(t))
	cmd.Env = append(config.EnvironWithoutVG(), "VG_DATABASE_URL="+cfg.DatabaseURL, "VG_BACKEND_OPS_ADDR=9080")
	done := make(chan struct{})
	var out []byte
	go func() { out, _ = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(testkit.WaitBound):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the backend did not stop on VG_BACKEND_OPS_ADDR=9080:\n%s", out)
	}
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "VG_BACKEND_OPS_ADDR") || !strings.Contains(string(out), "host:port") {
		t.Errorf("VG_BACKEND_OPS_ADDR=9080: exit %d, output %q; want exit 1 naming the variable and host:port", cmd.ProcessState.ExitCode(), out)
	}
}
