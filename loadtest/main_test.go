package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// asMain makes the test binary run main itself, with the arguments after the test flags'
// "--": the command as a user runs it.
const asMain = "VG_LOADTEST_RUN_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		args := os.Args[1:]
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
				break
			}
		}
		os.Args = append([]string{"loadtest"}, args...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runCommand runs `loadtest args...` as a process and returns its exit status and stderr.
func runCommand(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), asMain+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run loadtest %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// With no subcommand, or one it does not know, loadtest prints its usage and exits 2.
func TestNoArgumentsPrintsUsageAndExitsTwo(t *testing.T) {
	for _, args := range [][]string{nil, {"no-such-command"}} {
		status, stderr := runCommand(t, args...)
		if status != 2 || !strings.HasPrefix(stderr, "usage: loadtest compare") || !strings.Contains(stderr, "loadtest sale -code CODE") {
			t.Errorf("loadtest %v: exit %d, stderr %q; want 2 and the usage", args, status, stderr)
		}
	}
}
