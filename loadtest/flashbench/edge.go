package flashbench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Edge is an edge command started in front of a benchmark's backend. Close stops it and
// removes its files.
type Edge struct {
	Addr string // 127.0.0.1:port
	PID  int

	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartEdge builds the edge command (unless binary names one) and starts it on a free
// 127.0.0.1 port in front of b, listening to b's NATS subjects, with the configs/edge.yaml
// defaults otherwise; it returns once /readyz answers 200 (the edge sees a healthy backend).
func StartEdge(ctx context.Context, b *Backend, binary string) (e *Edge, err error) {
	e = &Edge{exited: make(chan struct{})}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if e.dir, err = os.MkdirTemp("", "vg-flashbench-edge-"); err != nil {
		return e, err
	}
	if binary == "" {
		binary = filepath.Join(e.dir, "edge")
		out, err := exec.CommandContext(ctx, "go", "build", "-o", binary, "vouchergate/edge").CombinedOutput()
		if err != nil {
			return e, fmt.Errorf("go build vouchergate/edge: %w\n%s", err, out)
		}
	}
	if e.Addr, err = freeAddr(); err != nil {
		return e, err
	}
	logf, err := os.Create(filepath.Join(e.dir, "edge.log"))
	if err != nil {
		return e, err
	}
	defer logf.Close()
	e.cmd = exec.Command(binary)
	e.cmd.Env = append(environWithoutVG(), "VG_EDGE_ADDR="+e.Addr, "VG_EDGE_BACKENDS="+b.Addr,
		"VG_NATS_URL="+b.servers.NATSURL, "VG_NATS_PREFIX="+b.natsPfx)
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	if err := e.cmd.Start(); err != nil {
		return e, fmt.Errorf("start %s: %w", binary, err)
	}
	e.PID = e.cmd.Process.Pid
	go func() { _ = e.cmd.Wait(); close(e.exited) }()
	return e, e.waitReady(ctx, 30*time.Second)
}

func (e *Edge) waitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	hc := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+e.Addr+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-e.exited:
			return fmt.Errorf("the edge exited at start:\n%s", e.LogTail(2000))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the edge did not answer /readyz 200 on %s within %v:\n%s", e.Addr, within, e.LogTail(2000))
		}
	}
}

// LogTail returns the last n bytes of the edge's output.
func (e *Edge) LogTail(n int) string {
	out, _ := os.ReadFile(filepath.Join(e.dir, "edge.log"))
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}

// Close stops the edge (SIGTERM to its PID, SIGKILL after 15 s) and removes its files.
func (e *Edge) Close() {
	if e.cmd != nil && e.cmd.Process != nil {
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.exited:
		case <-time.After(15 * time.Second):
			_ = e.cmd.Process.Kill()
			<-e.exited
		}
		e.cmd = nil
	}
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
		e.dir = ""
	}
}
