package configs_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
)

// runBounded runs argv in the repository's top folder with env and returns its exit status and
// output, failing the test if it runs past bound.
func runBounded(t *testing.T, bound time.Duration, env []string, argv ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = repoRoot, env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s still running after %v:\n%s", strings.Join(argv, " "), bound, out)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// make run refuses a port another process holds, naming it and its variable, before it builds
// or migrates anything: the process would otherwise pass for make run's own backend.
func TestMakeRunRefusesATakenPort(t *testing.T) {
	for _, name := range []string{"VG_BACKEND_ADDR", "VG_BACKEND_OPS_ADDR", "VG_EDGE_ADDR", "VG_EDGE_OPS_ADDR"} {
		t.Run(name, func(t *testing.T) {
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			env := config.EnvironWithoutVG()
			for _, v := range []string{"VG_BACKEND_ADDR", "VG_BACKEND_OPS_ADDR", "VG_EDGE_ADDR", "VG_EDGE_OPS_ADDR"} {
				addr := freeAddr(t)
				if v == name {
					addr = taken.Addr().String()
				}
				env = append(env, v+"="+addr)
			}
			status, out := runBounded(t, 30*time.Second, env, "bash", "scripts/run.sh")
			want := "run: " + taken.Addr().String() + " (" + name + ") is already taken by another process"
			if status != 1 || !strings.Contains(out, want) {
				t.Errorf("run.sh with %s taken: exit %d, output:\n%s\nwant exit 1 and %q", name, status, out, want)
			}
			if strings.Contains(out, "run: building") || strings.Contains(out, "backend listening") {
				t.Errorf("run.sh built or started something before refusing the port:\n%s", out)
			}
		})
	}
}

// make rehearse sends its sale to the edge and the backend where VG_EDGE_ADDR and
// VG_BACKEND_ADDR put them, not to the default ports.
func TestMakeRehearseOnMovedPorts(t *testing.T) {
	makeBin := tool(t, "make", "make")
	cfg := backendtest.Config(t)
	backend := backendtest.StartProcess(t, cfg)
	edge := backendtest.StartEdgeProcess(t, cfg, backend.Addr())
	reports := t.TempDir()
	env := append(config.EnvironWithoutVG(), "VG_BACKEND_ADDR="+backend.Addr(), "VG_EDGE_ADDR="+edge.Addr(),
		"VG_ADMIN_TOKEN="+backendtest.Token, "TMPDIR="+reports)
	status, out := runBounded(t, buildBound, env, makeBin, "--no-print-directory", "rehearse")
	// 0: the verdict passed; make's 2 with a failed verdict (a 503 on a busy machine fails it,
	// and make answers any failed recipe with 2): the sale ran all the same
	if status != 0 && !(status == 2 && strings.Contains(out, "verdict: FAIL")) {
		t.Fatalf("make rehearse on moved ports: exit %d; want the sale run (0, or 2 with its verdict):\n%s", status, tail(out, 8<<10))
	}
	sold := regexp.MustCompile(`sale of REHEARSE-[0-9]+ at http://` + regexp.QuoteMeta(edge.Addr()) + `: 10000 reservations offered`)
	if !sold.MatchString(out) || !strings.Contains(out, "1000 granted") {
		t.Errorf("make rehearse did not sell its 1000 uses through the edge on %s:\n%s", edge.Addr(), tail(out, 8<<10))
	}
	if _, err := os.Stat(filepath.Join(reports, "vouchergate-rehearsal.html")); err != nil {
		t.Errorf("the report is not in $TMPDIR: %v", err)
	}
}

// make help lists every target with what it does, for a user: no issue numbers.
func TestMakeHelp(t *testing.T) {
	makeBin := tool(t, "make", "make")
	status, out := runBounded(t, 30*time.Second, os.Environ(), makeBin, "--no-print-directory", "help")
	if status != 0 {
		t.Fatalf("make help: exit %d\n%s", status, out)
	}
	if m := regexp.MustCompile(`(?i)\bissues?\b|#[0-9]+`).FindString(out); m != "" {
		t.Errorf("make help mentions %q:\n%s", m, out)
	}
	for _, target := range []string{"run", "test", "rehearse", "bench-sale", "help"} {
		if !strings.Contains(out, target+": ") {
			t.Errorf("make help does not list %s:\n%s", target, out)
		}
	}
}
