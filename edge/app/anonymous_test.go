package app_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// edgeKey is a service key the edge commands below hold; it must never reach their output.
const edgeKey = "vg-edge-anonymous-test-key-0123456789abcdef"

// runEdgeUntilExit runs the edge command with env ("VG_…=…", over the test defaults of
// startEdgeProcess) and returns its exit status and output once it exits by itself; an edge
// still running after a bound fails the test (it was meant to refuse to start).
func runEdgeUntilExit(t *testing.T, env ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(backendtest.EdgeBinary(t))
	cmd.Env = edgeProcessEnv(t, freeAddr(t), env...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(testkit.WaitBound):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("the edge with %v started; want it to refuse:\n%s", env, out.String())
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// An edge with a service key and no shoppers' tokens would forward every anonymous request with
// the key's scopes: the command refuses to start, saying which variables to set and what to
// type, and never printing the key; an unknown VG_EDGE_ANONYMOUS is refused too.
func TestEdgeRefusesAServiceKeyForAnonymousCallers(t *testing.T) {
	status, out := runEdgeUntilExit(t, "VG_EDGE_API_KEY="+edgeKey)
	if status != 1 {
		t.Errorf("exit status %d; want 1", status)
	}
	for _, want := range []string{"VG_EDGE_API_KEY", "VG_EDGE_JWT_JWKS_FILE", "VG_EDGE_ANONYMOUS=allow"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not name %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, edgeKey) {
		t.Errorf("the refusal prints the service key:\n%s", out)
	}

	status, out = runEdgeUntilExit(t, "VG_EDGE_API_KEY="+edgeKey, "VG_EDGE_ANONYMOUS=yes")
	if status != 1 || !strings.Contains(out, "VG_EDGE_ANONYMOUS") || !strings.Contains(out, "allow") {
		t.Errorf("VG_EDGE_ANONYMOUS=yes: exit %d, output:\n%s\nwant exit 1 naming the variable and its values", status, out)
	}
}

// Each edge says once, at start, what the public may do: loudly (WARN) when anyone acts with
// its key because the operator allowed it, or when nothing is checked at the edge; plainly
// (INFO) when shoppers' tokens are verified.
func TestEdgeLogsWhatThePublicMayDo(t *testing.T) {
	iss := testkit.NewTokenIssuer(t)
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	writeFile(t, jwks, iss.JWKS(true))
	for _, tt := range []struct {
		name string
		env  []string
		want string // in the line that says "public access"
	}{
		{"key, anonymous allowed", []string{"VG_EDGE_API_KEY=" + edgeKey, "VG_EDGE_ANONYMOUS=allow"}, "level=WARN msg=\"public access: ANYONE"},
		{"no key, no tokens", nil, "level=WARN msg=\"public access: no shoppers' tokens and no service key"},
		{"tokens and key", []string{"VG_EDGE_API_KEY=" + edgeKey, "VG_EDGE_JWT_JWKS_FILE=" + jwks,
			"VG_EDGE_JWT_AUDIENCE=" + iss.Audience, "VG_EDGE_JWT_ISSUER=" + iss.Issuer}, "level=INFO msg=\"public access: reservation, confirm, release"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := startEdgeProcess(t, tt.env...)
			out := p.output(t)
			if n := strings.Count(out, "public access"); n != 1 {
				t.Errorf("%d lines say what the public may do; want 1:\n%s", n, out)
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("no line %q:\n%s", tt.want, out)
			}
			if strings.Contains(out, edgeKey) {
				t.Errorf("the edge logs its service key:\n%s", out)
			}
		})
	}
}
