package faulttest

import (
	"context"
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

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
)

func TestMain(m *testing.M) {
	// Fault tests dial dead servers on purpose; go-redis would log every refused dial.
	redis.SetLogger(quietRedis{})
	code := m.Run()
	backendtest.RemoveBinary()
	os.Exit(code)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// backendProcess is the backend command running as a child process on a fixed 127.0.0.1
// address, which the test can SIGKILL and start again. Its output goes to a log file, shown
// if the test fails; whatever runs when the test ends is killed by PID.
type backendProcess struct {
	t       *testing.T
	addr    string
	env     []string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// startBackendProcess runs the backend command with cfg's stores and the extra VG_* settings
// on a free port. The environment's own VG_* variables are dropped.
func startBackendProcess(t *testing.T, cfg config.Backend, extra ...string) *backendProcess {
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
		"VG_ADMIN_TOKEN="+backendtest.Token,
		"VG_EXPIRE_EVERY=0", "VG_RECONCILE_EVERY=0", "VG_WARMUP_EVERY=0", // the test runs them
	)
	p := &backendProcess{t: t, addr: addr, env: append(env, extra...), logPath: filepath.Join(t.TempDir(), "backend.log")}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			if b, err := os.ReadFile(p.logPath); err == nil {
				if len(b) > 16<<10 {
					b = b[len(b)-16<<10:]
				}
				t.Logf("backend process log (%s), tail:\n%s", p.logPath, b)
			}
		}
	})
	p.start()
	return p
}

// URL returns http://addr, the same across restarts.
func (p *backendProcess) URL() string { return "http://" + p.addr }

// start runs the command and returns once it answers /healthz. A start right after a kill may
// find the port still held; it tries again.
func (p *backendProcess) start() {
	p.t.Helper()
	bin := backendtest.Binary(p.t)
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
		p.kill()
		time.Sleep(250 * time.Millisecond)
	}
	p.t.Fatalf("the backend command did not start on %s", p.addr)
}

func (p *backendProcess) ready(done <-chan struct{}) bool {
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

// kill sends SIGKILL to the process and returns once it has exited.
func (p *backendProcess) kill() {
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
