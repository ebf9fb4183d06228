package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// How long a server gets to become ready, to stop gracefully, and how often a start is
// retried when the process exits at once (a port still held, a dying predecessor).
const (
	readyTimeout  = 30 * time.Second
	stopTimeout   = 15 * time.Second
	startAttempts = 20
	startBackoff  = 250 * time.Millisecond
	pollInterval  = 20 * time.Millisecond
	logTailBytes  = 16 << 10
)

// freePorts returns n distinct TCP ports on 127.0.0.1 that nothing listens on right now.
// All listeners are held until every port is chosen, so the kernel cannot hand one out twice.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testkit: find a free port: %v", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// findBinary returns the path of a server binary: on PATH, or else the newest match of the
// given globs. A missing binary fails the test, naming the apt package that provides it.
func findBinary(t testing.TB, name, aptPackage string, globs ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, g := range globs {
		matches, _ := filepath.Glob(g)
		sort.Strings(matches)
		if len(matches) > 0 {
			return matches[len(matches)-1]
		}
	}
	where := "on PATH"
	if len(globs) > 0 {
		where += " or in " + strings.Join(globs, ", ")
	}
	t.Fatalf("testkit: %s not found %s; install it with `apt-get install %s`", name, where, aptPackage)
	return ""
}

// process is one server process a test started. It may be started, killed and started
// again; whatever runs when the test ends is killed by PID. Its output goes to a log file
// in a temp dir, printed with t.Log if the test failed. Methods are safe for concurrent use.
type process struct {
	t       testing.TB
	name    string
	logPath string
	cred    *syscall.Credential // nil: run as this process's user

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has exited and been reaped
}

// newProcess prepares a process named name (for messages). Call it after creating every
// temp dir the process will write, so that its cleanup, which kills the process, runs before
// those dirs are removed.
func newProcess(t testing.TB, name string, cred *syscall.Credential) *process {
	t.Helper()
	p := &process{t: t, name: name, logPath: filepath.Join(t.TempDir(), "server.log"), cred: cred}
	t.Cleanup(func() {
		if err := p.kill(); err != nil {
			t.Errorf("testkit: %s: %v", name, err)
		}
		if t.Failed() {
			t.Logf("testkit: %s log (%s):\n%s", name, p.logPath, p.logTail())
		}
	})
	return p
}

// start runs argv and returns once ready reports nil. If the process exits before it is
// ready (a bind failing while the old socket lingers, a predecessor still shutting down),
// it is started again a few times. A process still not ready after readyTimeout is killed.
func (p *process) start(argv []string, ready func(ctx context.Context) error) error {
	var lastErr error
	for attempt := range startAttempts {
		if attempt > 0 {
			time.Sleep(startBackoff)
		}
		exited, err := p.startOnce(argv, ready)
		if err == nil {
			return nil
		}
		lastErr = err
		if !exited {
			break // it ran but never became ready: starting again will not help
		}
	}
	return fmt.Errorf("start %s: %w\nlog tail:\n%s", p.name, lastErr, p.logTail())
}

// startOnce makes one attempt; exited reports whether the process died on its own.
func (p *process) startOnce(argv []string, ready func(ctx context.Context) error) (exited bool, err error) {
	done, err := p.spawn(argv)
	if err != nil {
		return false, err
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-done:
			return true, errors.New("process exited before it was ready")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := ready(ctx)
		cancel()
		if err == nil {
			return false, nil
		}
		if time.Now().After(deadline) {
			_ = p.kill()
			return false, fmt.Errorf("not ready after %s: %w", readyTimeout, err)
		}
		time.Sleep(pollInterval)
	}
}

func (p *process) spawn(argv []string) (<-chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return nil, fmt.Errorf("%s is already running (pid %d)", p.name, p.cmd.Process.Pid)
		}
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own copy
	fmt.Fprintf(logFile, "=== testkit: %s: %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group: a ^C in the terminal reaches the test binary, whose cleanup kills
	// the server, instead of killing the server first. Pdeathsig kills the server if the
	// test binary dies without running its cleanups (a -timeout panic).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return done, nil
}

// pid returns the PID of the running process, or 0 if none runs.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// running reports whether the process runs.
func (p *process) running() bool { return p.pid() != 0 }

// kill sends SIGKILL and returns once the process has exited. Killing a stopped process
// does nothing.
func (p *process) kill() error { return p.signalAndWait(syscall.SIGKILL, 0) }

// stop sends sig and returns once the process has exited; after stopTimeout it is killed
// and an error says so.
func (p *process) stop(sig syscall.Signal) error { return p.signalAndWait(sig, stopTimeout) }

func (p *process) signalAndWait(sig syscall.Signal, timeout time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s pid %d: %w", sig, cmd.Process.Pid, err)
	}
	return p.wait(cmd, done, timeout)
}

// wait returns once cmd has exited. With a timeout, a process still running after it is
// killed and an error returned.
func (p *process) wait(cmd *exec.Cmd, done <-chan struct{}, timeout time.Duration) error {
	if timeout <= 0 {
		<-done
		return nil
	}
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s (pid %d) did not exit within %s; killed", p.name, cmd.Process.Pid, timeout)
	}
}

// waitExited returns once the running process has exited by itself or by another's signal
// (e.g. pg_ctl stop), killing it after stopTimeout.
func (p *process) waitExited() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	return p.wait(cmd, done, stopTimeout)
}

// logTail returns the end of the log file.
func (p *process) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > logTailBytes {
		b = append([]byte("...\n"), b[len(b)-logTailBytes:]...)
	}
	return string(b)
}
