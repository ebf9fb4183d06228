package backendtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The backend and edge commands, each built once per test binary (when a test asks for it) into
// one folder, for tests that run them as processes they can signal. The test binary's TestMain
// calls RemoveBinary.
var (
	dirOnce sync.Once
	dir     string
	dirErr  error

	backend = command{pkg: "vouchergate/backend", name: "backend"}
	edge    = command{pkg: "vouchergate/edge", name: "edge"}
)

type command struct {
	pkg, name string
	once      sync.Once
	path      string
	err       error
}

// build builds c once into the shared folder and returns its path.
func (c *command) build(t testing.TB) string {
	t.Helper()
	dirOnce.Do(func() { dir, dirErr = os.MkdirTemp("", "vg-bin-") })
	if dirErr != nil {
		t.Fatalf("make a folder for the commands: %v", dirErr)
	}
	c.once.Do(func() {
		c.path = filepath.Join(dir, c.name)
		if out, err := exec.Command("go", "build", "-o", c.path, c.pkg).CombinedOutput(); err != nil {
			c.err = fmt.Errorf("go build %s: %w\n%s", c.pkg, err, out)
		}
	})
	if c.err != nil {
		t.Fatalf("build the %s command: %v", c.name, c.err)
	}
	return c.path
}

// Binary builds the backend command once and returns its path.
func Binary(t testing.TB) string { t.Helper(); return backend.build(t) }

// EdgeBinary builds the edge command once and returns its path.
func EdgeBinary(t testing.TB) string { t.Helper(); return edge.build(t) }

// RemoveBinary deletes what Binary and EdgeBinary built, if anything.
func RemoveBinary() {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}
