package app_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
	"vouchergate/testkit"
)

// The edge command as a child process, for what only a process shows: its memory, and the caps
// on the connections it accepts.

// edgeProcess is a running edge command.
type edgeProcess struct {
	Addr    string
	cmd     *exec.Cmd
	logPath string
}

// startEdgeProcess runs the edge command on a free port with settings env ("VG_…=…") over
// defaults for a test: no backend reachable, the test's NATS prefix, no ops listener. It
// returns once the edge answers /healthz; the process is killed by PID when the test ends.
func startEdgeProcess(t *testing.T, env ...string) *edgeProcess {
	t.Helper()
	bin := backendtest.EdgeBinary(t)
	addr := freeAddr(t)
	cmd := exec.Command(bin)
	cmd.Env = edgeProcessEnv(t, addr, env...)
	logPath := filepath.Join(t.TempDir(), "edge.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p := &edgeProcess{Addr: addr, cmd: cmd, logPath: logPath}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logFile.Close()
		if t.Failed() {
			t.Logf("edge process log, tail:\n%s", tail([]byte(p.output(t)), 8<<10))
		}
	})
	once := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // no idle connection left to count
	testkit.Eventually(t, "the edge process answers /healthz", func() bool {
		select {
		case <-exited:
			t.Fatalf("the edge process exited:\n%s", p.output(t))
		default:
		}
		resp, err := once.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p
}

// edgeProcessEnv is the environment of an edge command listening on addr: env over defaults
// for a test (no backend reachable, the test's NATS prefix, no ops listener), without the VG_
// variables of the test's own environment.
func edgeProcessEnv(t *testing.T, addr string, env ...string) []string {
	t.Helper()
	base := []string{
		"VG_EDGE_ADDR=" + addr, "VG_EDGE_BACKENDS=" + freeAddr(t), "VG_NATS_URL=" + testkit.NATSURL,
		"VG_NATS_PREFIX=" + testkit.NATSPrefix(), "VG_EDGE_OPS_ADDR=off", "VG_EDGE_SYNC_WAIT=0s",
	}
	return append(append(config.EnvironWithoutVG(), base...), env...)
}

// output returns what the process wrote to stdout and stderr so far.
func (p *edgeProcess) output(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Fatalf("read the edge's output: %v", err)
	}
	return string(b)
}

// status returns a field of /proc/PID/status in kB (VmRSS, VmHWM).
func (p *edgeProcess) status(t *testing.T, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("%s: %q: %v", field, line, err)
			}
			return kb
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, p.cmd.Process.Pid)
	return 0
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

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// rawConn is a client connection written and read byte by byte, as an attacker's would be.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

// answer reads one final answer's status and body, after any 1xx.
func (c *rawConn) answer(t *testing.T) (int, string) {
	t.Helper()
	resp, err := http.ReadResponse(c.r, nil)
	for err == nil && resp.StatusCode < 200 {
		resp, err = http.ReadResponse(c.r, nil)
	}
	if err != nil {
		t.Fatalf("read an answer: %v", err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&sb)
	return resp.StatusCode, sb.String()
}

// readStatus reads one final answer from c, after any 1xx, and returns its status.
func readStatus(c net.Conn) (int, error) {
	r := bufio.NewReader(c)
	for {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		if resp.StatusCode >= 200 { // a 100 Continue comes before the answer
			return resp.StatusCode, nil
		}
	}
}
