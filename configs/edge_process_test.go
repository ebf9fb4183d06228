package configs_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// The edge command, built once per test binary (backendtest.Binary builds the backend).
var (
	edgeBuildOnce sync.Once
	edgeBinary    string
	edgeBuildErr  error
)

func buildEdge(t *testing.T) string {
	t.Helper()
	edgeBuildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vg-edge-bin-")
		if err != nil {
			edgeBuildErr = err
			return
		}
		edgeBinary = filepath.Join(dir, "edge")
		if out, err := exec.Command("go", "build", "-o", edgeBinary, "vouchergate/edge").CombinedOutput(); err != nil {
			edgeBuildErr = fmt.Errorf("go build vouchergate/edge: %w\n%s", err, out)
		}
	})
	if edgeBuildErr != nil {
		t.Fatalf("build the edge command: %v", edgeBuildErr)
	}
	return edgeBinary
}

func removeEdgeBinary() {
	if edgeBinary != "" {
		_ = os.RemoveAll(filepath.Dir(edgeBinary))
	}
}

// startChild runs argv with env as the whole environment, its output in a log file shown if
// the test fails; it is killed by PID when the test ends (and with the test binary, Pdeathsig).
func startChild(t *testing.T, name string, env []string, argv ...string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child holds its own copy
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 8<<10 {
				b = b[len(b)-8<<10:]
			}
			t.Logf("%s log (pid %d), tail:\n%s", name, cmd.Process.Pid, b)
		}
	})
}
