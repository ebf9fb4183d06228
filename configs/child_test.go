package configs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

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
