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
	"vouchergate/shared/config"
)

// process is one of this repository's commands (the backend, the edge) run as a child for a
// benchmark: built into a folder of its own unless a binary is given, its output in a log file
// there, stopped by SIGTERM and, after a grace, SIGKILL.
type process struct {
	PID int

	command string // "backend" or "edge": the package vouchergate/<command>, the log's name
	dir     string // the built binary and the log
	cmd     *exec.Cmd
	exited  chan struct{}
}

// prepare makes the process's folder and builds the command into it unless binary names one;
// it returns the binary to run.
func (p *process) prepare(ctx context.Context, command, binary string) (string, error) {
	p.command, p.exited = command, make(chan struct{})
	var err error
	if p.dir, err = os.MkdirTemp("", "vg-flashbench-"+command+"-"); err != nil {
		return "", err
	}
	if binary != "" {
		return binary, nil
	}
	binary = filepath.Join(p.dir, command)
	out, err := exec.CommandContext(ctx, "go", "build", "-o", binary, "vouchergate/"+command).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build vouchergate/%s: %w\n%s", command, err, out)
	}
	return binary, nil
}

// start runs binary with env (added to this environment less its VG_ settings), its output
// going to the log.
func (p *process) start(binary string, env ...string) error {
	logf, err := os.Create(p.logPath())
	if err != nil {
		return err
	}
	defer logf.Close()
	p.cmd = exec.Command(binary)
	p.cmd.Env = append(config.EnvironWithoutVG(), env...) // the Makefile exports some VG_ settings
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", binary, err)
	}
	p.PID = p.cmd.Process.Pid
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	return nil
}

// waitReady polls url until it answers 200, the process exits, ctx ends or within passes.
func (p *process) waitReady(ctx context.Context, url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	hc := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("the %s exited at start:\n%s", p.command, p.LogTail(2000))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %s did not answer %s with 200 within %v:\n%s", p.command, url, within, p.LogTail(2000))
		}
	}
}

func (p *process) logPath() string { return filepath.Join(p.dir, p.command+".log") }

// LogTail returns the last n bytes of the process's output.
func (p *process) LogTail(n int) string {
	out, _ := os.ReadFile(p.logPath())
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}

// stop sends SIGTERM, and SIGKILL after grace, and waits for the process to end.
func (p *process) stop(grace time.Duration) {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.cmd = nil
}

// removeFiles removes the process's folder.
func (p *process) removeFiles() error {
	if p.dir == "" {
		return nil
	}
	err := os.RemoveAll(p.dir)
	p.dir = ""
	return err
}
