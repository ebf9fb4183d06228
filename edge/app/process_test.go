package app_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
)

func TestMain(m *testing.M) {
	code := m.Run()
	backendtest.RemoveBinary()
	os.Exit(code)
}

// backendProcess is `go run ./backend` as a child process the test can SIGKILL and restart
// on the same address.
type backendProcess struct {
	t    *testing.T
	addr string
	env  []string
	cmd  *exec.Cmd
	done chan struct{}
}

// startBackendProcess starts the backend command with cfg on addr (a free port when empty).
func startBackendProcess(t *testing.T, cfg config.Backend, addr string) *backendProcess {
	t.Helper()
	if addr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr().String()
		ln.Close()
	}
	p := &backendProcess{t: t, addr: addr, env: append(os.Environ(),
		"VG_CONFIG=",
		"VG_BACKEND_ADDR="+addr,
		"VG_DATABASE_URL="+cfg.DatabaseURL,
		"VG_REDIS_URL="+cfg.RedisURL,
		"VG_REDIS_PREFIX="+cfg.RedisPrefix,
		"VG_NATS_URL="+cfg.NATSURL,
		"VG_NATS_PREFIX="+cfg.NATSPrefix,
		"VG_ADMIN_TOKEN="+backendtest.Token,
		"VG_DEMO_VOUCHER=",
	)}
	t.Cleanup(p.kill)
	p.start()
	return p
}

func (p *backendProcess) start() {
	p.t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		cmd := exec.Command(backendtest.Binary(p.t))
		cmd.Env = p.env
		if err := cmd.Start(); err != nil {
			p.t.Fatalf("start backend: %v", err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		p.cmd, p.done = cmd, done
		if p.ready() {
			return
		}
		p.kill() // the port may still be held by the killed one; try again
		time.Sleep(250 * time.Millisecond)
	}
	p.t.Fatalf("backend did not start on %s", p.addr)
}

// ready waits for the backend to answer /healthz, or to exit.
func (p *backendProcess) ready() bool {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", p.addr)
		cancel()
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(time.Second))
			_, _ = conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
			buf := make([]byte, 12)
			n, _ := conn.Read(buf)
			conn.Close()
			if n == 12 && string(buf[9:12]) == "200" {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// kill sends SIGKILL and waits for the process to go.
func (p *backendProcess) kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
}
