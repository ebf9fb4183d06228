package app_test

import (
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// The edge command, sent requests it cannot read with a client's bearer token and cookie in
// them, never writes them to its output, and thousands of them write a bounded number of lines:
// one per second for each kind of report.
func TestMalformedRequestsLogNoSecretAndNoFlood(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.Start(t, cfg)
	addr, output := startEdgeCommand(t, "VG_EDGE_BACKENDS="+b.Addr, "VG_NATS_URL="+cfg.NATSURL, "VG_NATS_PREFIX="+cfg.NATSPrefix)
	const secret = "client-secret-5d81"
	reqs := testkit.MalformedRequests(secret)
	for _, raw := range reqs {
		if status, body := testkit.RawHTTP(t, addr, raw); status != 400 {
			t.Errorf("%q: %d %s; want 400", raw, status, body)
		}
	}
	start := time.Now()
	const flood = 2000
	testkit.SendMalformed(t, addr, reqs, flood, 8)
	elapsed := time.Since(start)
	testkit.Eventually(t, "the edge to log what it could not read", func() bool {
		return strings.Contains(output(), "error when serving connection")
	})

	out := output()
	if i := strings.Index(out, secret); i >= 0 {
		t.Errorf("the edge wrote the client's secret to its output: %q", out[max(0, i-300):min(len(out), i+100)])
	}
	lines := strings.Count(out, "error when serving connection")
	// one line per second per kind: all these are one kind; 2x for slack at the edges
	if bound := 2 * (int(elapsed/time.Second) + 2); lines > bound {
		t.Errorf("%d malformed requests in %s wrote %d lines (%d bytes of output); want at most %d",
			flood+len(reqs), elapsed.Round(time.Millisecond), lines, len(out), bound)
	}
}

// startEdgeCommand builds the edge command into the test's temp dir and runs it on a free
// 127.0.0.1 port with env (VG_* settings; the environment's own are dropped) until the test
// ends, killing it by PID. It returns the edge's address once it answers /healthz, and a
// function reading what it wrote to stdout and stderr.
func startEdgeCommand(t *testing.T, env ...string) (string, func() string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "edge")
	if out, err := exec.Command("go", "build", "-o", bin, "vouchergate/edge").CombinedOutput(); err != nil {
		t.Fatalf("go build vouchergate/edge: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logPath := filepath.Join(dir, "edge.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child holds its own copy
	cmd := exec.Command(bin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VG_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, "VG_EDGE_ADDR="+addr), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the edge command: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	output := func() string {
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatalf("read the edge's output: %v", err)
		}
		return string(b)
	}
	t.Cleanup(func() {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("kill edge pid %d: %v", cmd.Process.Pid, err)
		}
		<-done
		if t.Failed() {
			out := output()
			t.Logf("edge output (%s), tail:\n%s", logPath, out[max(0, len(out)-8<<10):])
		}
	})
	hc := &http.Client{Timeout: time.Second}
	testkit.Eventually(t, "the edge command to answer /healthz", func() bool {
		select {
		case <-done:
			t.Fatalf("the edge command exited:\n%s", output())
		default:
		}
		resp, err := hc.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return addr, output
}
