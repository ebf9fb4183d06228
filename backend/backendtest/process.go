package backendtest

import (
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"vouchergate/shared/config"
)

// Process is the backend command running as a child process on a fixed 127.0.0.1 address,
// which the test can SIGKILL and start again. Its output goes to a log file, shown if the test
// fails; whatever runs when the test ends is killed by PID. The test binary's TestMain calls
// RemoveBinary.
type Process struct {
	t       testing.TB
	addr    string
	env     []string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartProcess runs the backend command with cfg's stores, prefixes and the test token, and
// the extra VG_* settings ("VG_DB_TIMEOUT=1s"), on a free port, and returns once it answers
// /healthz. The environment's own VG_* variables are dropped; the jobs are off (the test runs
// them) and no demo voucher is made, unless extra says otherwise.
func StartProcess(t testing.TB, cfg config.Backend, extra ...string) *Process {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VG_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"VG_BACKEND_ADDR="+addr,
		"VG_DATABASE_URL="+cfg.DatabaseURL,
		"VG_REDIS_URL="+cfg.RedisURL,
		"VG_REDIS_PREFIX="+cfg.RedisPrefix,
		"VG_NATS_URL="+cfg.NATSURL,
		"VG_NATS_PREFIX="+cfg.NATSPrefix,
		"VG_ADMIN_TOKEN="+Token,
		"VG_EXPIRE_EVERY=0", "VG_RECONCILE_EVERY=0", "VG_WARMUP_EVERY=0",
	)
	p := &Process{t: t, addr: addr, env: append(env, extra...), logPath: filepath.Join(t.TempDir(), "backend.log")}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			if b, err := os.ReadFile(p.logPath); err == nil {
				if len(b) > 16<<10 {
					b = b[len(b)-16<<10:]
				}
				t.Logf("backend process log (%s), tail:\n%s", p.logPath, b)
			}
		}
	})
	p.Start()
	return p
}

// Addr returns host:port, the same across restarts.
func (p *Process) Addr() string { return p.addr }

// URL returns http://host:port, the same across restarts.
func (p *Process) URL() string { return "http://" + p.addr }

// Start runs the command and returns once it answers /healthz. A start right after a kill may
// find the port still held; it tries again.
func (p *Process) Start() {
	p.t.Helper()
	bin := Binary(p.t)
	for try := 0; try < 20; try++ {
		logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			p.t.Fatal(err)
		}
		cmd := exec.Command(bin)
		cmd.Env, cmd.Stdout, cmd.Stderr = p.env, logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		err = cmd.Start()
		logFile.Close()
		if err != nil {
			p.t.Fatalf("start the backend command: %v", err)
		}
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(done)
		}()
		p.mu.Lock()
		p.cmd, p.done = cmd, done
		p.mu.Unlock()
		if p.ready(done) {
			return
		}
		p.Kill()
		time.Sleep(250 * time.Millisecond)
	}
	p.t.Fatalf("the backend command did not start on %s", p.addr)
}

// ready polls /healthz until it answers 200 (true), or the process exits or 30 s pass (false).
func (p *Process) ready(done <-chan struct{}) bool {
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	defer hc.CloseIdleConnections()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		select {
		case <-done:
			return false
		default:
		}
		if resp, err := hc.Get(p.URL() + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// Kill sends SIGKILL to the process and returns once it has exited.
func (p *Process) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Errorf("kill backend pid %d: %v", cmd.Process.Pid, err)
	}
	<-done
}

// Output returns what the process wrote to stdout and stderr so far, across restarts.
func (p *Process) Output() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		p.t.Fatalf("read the backend process log: %v", err)
	}
	return string(b)
}

// Signal sends sig to the running process (the one this Process started, by its pid).
func (p *Process) Signal(sig os.Signal) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		p.t.Fatal("signal: the backend process is not running")
	}
	if err := cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal backend pid %d: %v", cmd.Process.Pid, err)
	}
}
