package backendtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The backend command, built once per test binary for tests that run it as a process they
// can SIGKILL.
var (
	buildOnce sync.Once
	buildDir  string
	binPath   string
	buildErr  error
)

// Binary builds the backend command once and returns its path. Call RemoveBinary from
// TestMain after the tests ran.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "vg-backend-bin-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "backend")
		out, err := exec.Command("go", "build", "-o", binPath, "vouchergate/backend").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build vouchergate/backend: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build the backend command: %v", buildErr)
	}
	return binPath
}

// RemoveBinary deletes what Binary built, if anything.
func RemoveBinary() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// The edge command, built once per test binary for tests that put it in front of a backend.
var (
	edgeOnce     sync.Once
	edgePath     string
	edgeBuildErr error
)

// EdgeBinary builds the edge command once, next to the backend's, and returns its path.
func EdgeBinary(t testing.TB) string {
	t.Helper()
	Binary(t) // makes the folder RemoveBinary deletes
	edgeOnce.Do(func() {
		edgePath = filepath.Join(buildDir, "edge")
		out, err := exec.Command("go", "build", "-o", edgePath, "vouchergate/edge").CombinedOutput()
		if err != nil {
			edgeBuildErr = fmt.Errorf("go build vouchergate/edge: %w\n%s", err, out)
		}
	})
	if edgeBuildErr != nil {
		t.Fatalf("build the edge command: %v", edgeBuildErr)
	}
	return edgePath
}
