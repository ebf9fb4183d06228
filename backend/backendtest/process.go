package backendtest

import (
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/config"
)

// Process is the backend command (or the edge: StartEdgeProcess) running as a child process on
// a fixed 127.0.0.1 address, which the test can SIGKILL or SIGTERM and start again. Its output goes to a log file, shown if the test
// fails; whatever runs when the test ends is killed by PID. The test binary's TestMain calls
// RemoveBinary.
type Process struct {
	t       testing.TB
	addr    string
	opsAddr string // the backend's ops listener; "" for the edge, which runs none
	env     []string
	logPath string
	binary  func(testing.TB) string // Binary, or EdgeBinary
	name    string                  // "backend" or "edge", for messages

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartProcess runs the backend command with cfg's stores, prefixes and the test token, and
// the extra VG_* settings ("VG_DB_TIMEOUT=1s"), on a free port, and returns once it answers
// /healthz. Its ops listener (/metrics) is on a free port too (OpsURL). The environment's own
// VG_* variables are dropped; the jobs are off (the test runs them) and no demo voucher is
// made, unless extra says otherwise.
func StartProcess(t testing.TB, cfg config.Backend, extra ...string) *Process {
	t.Helper()
	addr, opsAddr := freeAddr(t), freeAddr(t)
	env := append(config.EnvironWithoutVG(),
		"VG_BACKEND_ADDR="+addr, "VG_BACKEND_OPS_ADDR="+opsAddr,
		"VG_DATABASE_URL="+cfg.DatabaseURL,
		"VG_REDIS_URL="+cfg.RedisURL,
		"VG_REDIS_PREFIX="+cfg.RedisPrefix,
		"VG_NATS_URL="+cfg.NATSURL,
		"VG_NATS_PREFIX="+cfg.NATSPrefix,
		"VG_NATS_REPLICAS="+strconv.Itoa(max(1, cfg.NATSReplicas)),
		"VG_ADMIN_TOKEN="+Token,
		"VG_EXPIRE_EVERY=0", "VG_RECONCILE_EVERY=0", "VG_WARMUP_EVERY=0",
	)
	if len(cfg.RedisClusterAddrs) > 0 {
		env = append(env, "VG_REDIS_CLUSTER_ADDRS="+strings.Join(cfg.RedisClusterAddrs, ","))
	}
	p := &Process{t: t, addr: addr, opsAddr: opsAddr, env: append(env, extra...), logPath: filepath.Join(t.TempDir(), "backend.log"),
		binary: Binary, name: "backend"}
	DeleteBucketWhenDone(t, cfg) // registered first: runs after the process is killed
	p.run()
	return p
}

// StartEdgeProcess runs the edge command on a free port in front of backends (host:port,
// comma-separated), on cfg's NATS subjects, with the extra VG_* settings, and returns once it
// answers /healthz. It has no ops listener and does not wait for the sold-out set. The
// environment's own VG_* variables are dropped.
func StartEdgeProcess(t testing.TB, cfg config.Backend, backends string, extra ...string) *Process {
	t.Helper()
	addr := freeAddr(t)
	env := append(config.EnvironWithoutVG(),
		"VG_EDGE_ADDR="+addr, "VG_EDGE_BACKENDS="+backends,
		"VG_NATS_URL="+cfg.NATSURL, "VG_NATS_PREFIX="+cfg.NATSPrefix,
		"VG_NATS_REPLICAS="+strconv.Itoa(max(1, cfg.NATSReplicas)),
		"VG_EDGE_OPS_ADDR="+config.OpsOff, "VG_EDGE_SYNC_WAIT=0s",
	)
	p := &Process{t: t, addr: addr, env: append(env, extra...), logPath: filepath.Join(t.TempDir(), "edge.log"),
		binary: EdgeBinary, name: "edge"}
	p.run()
	return p
}

// run starts the process, and kills it when the test ends, showing its log if the test failed.
func (p *Process) run() {
	p.t.Helper()
	p.t.Cleanup(func() {
		p.Kill()
		if p.t.Failed() {
			if b, err := os.ReadFile(p.logPath); err == nil {
				if len(b) > 16<<10 {
					b = b[len(b)-16<<10:]
				}
				p.t.Logf("%s process log (%s), tail:\n%s", p.name, p.logPath, b)
			}
		}
	})
	p.Start()
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Addr returns host:port, the same across restarts.
func (p *Process) Addr() string { return p.addr }

// URL returns http://host:port, the same across restarts.
func (p *Process) URL() string { return "http://" + p.addr }

// OpsAddr returns the backend's ops listener (/metrics), host:port, the same across restarts.
// The edge runs none: "".
func (p *Process) OpsAddr() string { return p.opsAddr }

// OpsURL returns http:// and OpsAddr; "" for the edge.
func (p *Process) OpsURL() string {
	if p.opsAddr == "" {
		return ""
	}
	return "http://" + p.opsAddr
}

// Start runs the command and returns once it answers /healthz. A start right after a kill may
// find the port still held; it tries again.
func (p *Process) Start() {
	p.t.Helper()
	bin := p.binary(p.t)
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
			p.t.Fatalf("start the %s command: %v", p.name, err)
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
	p.t.Fatalf("the %s command did not start on %s", p.name, p.addr)
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
		p.t.Errorf("kill %s pid %d: %v", p.name, cmd.Process.Pid, err)
	}
	<-done
}

// Terminate sends SIGTERM and waits up to within for the process to exit. It returns the exit
// status (-1 if a signal ended it) and how long the exit took from the signal; if the process
// is still running after within, it fails the test and kills it.
func (p *Process) Terminate(within time.Duration) (status int, took time.Duration) {
	p.t.Helper()
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		p.t.Fatalf("terminate the %s: not running", p.name)
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("SIGTERM %s pid %d: %v", p.name, cmd.Process.Pid, err)
	}
	select {
	case <-done:
	case <-time.After(within):
		p.t.Errorf("the %s (pid %d) did not exit within %v of SIGTERM; killing it", p.name, cmd.Process.Pid, within)
		p.Kill()
		return -1, time.Since(start)
	}
	took = time.Since(start)
	p.mu.Lock()
	if p.cmd == cmd {
		p.cmd = nil
	}
	p.mu.Unlock()
	return cmd.ProcessState.ExitCode(), took
}

// Output returns what the process wrote to stdout and stderr so far, across restarts.
func (p *Process) Output() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		p.t.Fatalf("read the %s process log: %v", p.name, err)
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

// Client returns a Backend that calls this process's address (admin paths with the test
// token), for creating vouchers and releasing holds on a backend the test can kill. It has no
// App; it works across restarts.
func (p *Process) Client() *Backend {
	return &Backend{URL: p.URL(), Addr: p.addr, client: &fasthttp.Client{
		MaxConnsPerHost: 64, ReadTimeout: 60 * time.Second, WriteTimeout: 60 * time.Second,
	}}
}
