package configs_test

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
	"vouchergate/testkit"
)

// runScriptBound bounds make run's start (migrations, the demo voucher, the edge taking the
// backend into service) to the first reservation answered: the "within a minute".
// buildBound bounds the two builds before it, which on a cold cache and a busy shared machine
// take longer than the rest: a bound against a hang, not a promise about compile time.
const (
	runScriptBound = 60 * time.Second
	buildBound     = 5 * time.Minute
)

// scripts/run.sh (make run) on free ports with a database, Redis prefix and NATS prefix of its
// own: the README's first reservation goes through the edge, and Ctrl-C (SIGINT to the whole
// process group, as a terminal sends it) stops both processes gracefully, edge first, exit 0.
func TestMakeRunScriptServesAndStopsOnCtrlC(t *testing.T) {
	cfg := backendtest.Config(t)
	backendtest.DeleteBucketWhenDone(t, cfg)
	backendAddr, edgeAddr, opsAddr, backendOps := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	env := append(config.EnvironWithoutVG(),
		"VG_BACKEND_ADDR="+backendAddr, "VG_EDGE_ADDR="+edgeAddr, "VG_EDGE_OPS_ADDR="+opsAddr, "VG_BACKEND_OPS_ADDR="+backendOps,
		"VG_DATABASE_URL="+cfg.DatabaseURL, "VG_REDIS_URL="+cfg.RedisURL, "VG_REDIS_PREFIX="+cfg.RedisPrefix,
		"VG_NATS_URL="+cfg.NATSURL, "VG_NATS_PREFIX="+cfg.NATSPrefix,
		// what the Makefile exports for make run
		"VG_ADMIN_TOKEN=dev-admin-token", "VG_DEMO_VOUCHER=FLASH100",
	)
	logPath := filepath.Join(t.TempDir(), "run.log")
	run := startScript(t, logPath, env, "bash", "scripts/run.sh")

	testkit.EventuallyWithin(t, buildBound, "run.sh builds both commands and starts them", func() bool {
		return strings.Contains(readLog(t, logPath), "run: edge on") || exited(run)
	})
	if exited(run) {
		t.Fatalf("run.sh exited before serving: %v", run.err)
	}
	if log := readLog(t, logPath); !strings.Contains(log, "run: building bin/backend and bin/edge") {
		t.Errorf("run.sh built without saying so first (a cold build takes minutes):\n%s", log)
	}

	// the README's first example, through the edge
	var status int
	var body string
	testkit.EventuallyWithin(t, runScriptBound, "make run's edge answers the README's first reservation", func() bool {
		req, _ := http.NewRequest("POST", "http://"+edgeAddr+"/vouchers/FLASH100/reservations",
			strings.NewReader(`{"customerId":42,"orderId":"order-1","orderAmount":500}`))
		resp, err := client.Do(req)
		if err != nil {
			return false // not listening yet
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		status, body = resp.StatusCode, string(b)
		return status != http.StatusServiceUnavailable // the edge has no backend in service yet
	})
	if status != http.StatusCreated || !strings.Contains(body, `"discountAmount":100`) {
		t.Fatalf("first reservation through the edge: %d %s; want 201 with discountAmount 100", status, body)
	}
	// the backend's metrics on its ops listener, none on its public port
	if st, pub := getStatus("http://"+backendOps+"/metrics"), getStatus("http://"+backendAddr+"/metrics"); st != http.StatusOK || pub != http.StatusNotFound {
		t.Errorf("make run's backend: /metrics %d on VG_BACKEND_OPS_ADDR, %d on VG_BACKEND_ADDR; want 200 and 404", st, pub)
	}

	// Ctrl-C: SIGINT to every process of the terminal's foreground group
	if err := syscall.Kill(-run.pid, syscall.SIGINT); err != nil {
		t.Fatalf("SIGINT process group %d: %v", run.pid, err)
	}
	select {
	case <-run.done:
	case <-time.After(2 * runScriptBound): // both graces (10 s each) and then some
		t.Fatalf("run.sh did not exit within %v of SIGINT", 2*runScriptBound)
	}
	if run.err != nil {
		t.Errorf("run.sh after Ctrl-C: %v; want exit status 0", run.err)
	}

	log := readLog(t, logPath)
	edgeDown := strings.Index(log, "edge shut down")
	backendDraining := strings.Index(log, "backend shutting down")
	backendDown := strings.Index(log, "backend shut down")
	switch {
	case edgeDown < 0 || backendDown < 0:
		t.Errorf("run.sh's log has no \"edge shut down\" (%v) or no \"backend shut down\" (%v): a process did not shut down gracefully",
			edgeDown >= 0, backendDown >= 0)
	case backendDraining < edgeDown:
		t.Errorf("the backend began shutting down before the edge had shut down: the edge must stop first")
	}
	for _, name := range []string{"edge", "backend"} {
		if n := strings.Count(log, name+" shutting down"); n != 1 {
			t.Errorf("%q logged %d times; want once", name+" shutting down", n)
		}
	}
}

// script is a command the test runs as a process group of its own.
type script struct {
	pid  int
	done chan struct{} // closed once it has exited; then err is its Wait's
	err  error
}

// startScript runs argv in the repository's top folder as a process group of its own (the
// test sends the group its signals, as a terminal would), its output in logPath, shown if the
// test fails. When the test ends, whatever still runs is killed by PID: the script's children
// first (they may run in sessions of their own), then the script's group.
func startScript(t *testing.T, logPath string, env []string, argv ...string) *script {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the script holds its own copy
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = repoRoot, env, logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", strings.Join(argv, " "), err)
	}
	s := &script{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default: // still running: the test failed before it stopped
			for _, child := range testkit.ChildPIDs(s.pid) {
				_ = syscall.Kill(child, syscall.SIGKILL)
			}
			_ = syscall.Kill(-s.pid, syscall.SIGKILL)
			<-s.done
		}
		if t.Failed() {
			t.Logf("%s log (pid %d), tail:\n%s", strings.Join(argv, " "), s.pid, tail(readLog(t, logPath), 16<<10))
		}
	})
	return s
}

func exited(s *script) bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// environWithoutVG is this process's environment without its VG_* settings: a child's are
// only the test's.
