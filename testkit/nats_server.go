package testkit

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// NATSServer is a throwaway nats-server with JetStream on a free 127.0.0.1 port and its
// store dir in a temp dir, for tests that kill and restart NATS. It keeps its port and
// store across restarts, and whatever runs when the test ends is killed by PID.
//
// Kill and Stop may be called from any goroutine; Start fails the test with t.Fatal, so call
// it from the goroutine running the test.
type NATSServer struct {
	t    testing.TB
	port int
	argv []string
	proc *process
}

// StartNATS starts a nats-server (-js -sd <temp dir>) and returns once a client can connect
// and JetStream answers. It fails the test if nats-server is missing or does not start.
func StartNATS(t testing.TB) *NATSServer {
	t.Helper()
	bin := findBinary(t, "nats-server", "nats-server")
	s := &NATSServer{t: t, port: freePorts(t, 1)[0]}
	s.argv = []string{bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", t.TempDir()}
	s.proc = newProcess(t, "nats-server "+s.Addr(), nil)
	s.Start()
	return s
}

// Addr returns the server's host:port, the same across restarts.
func (s *NATSServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// URL returns nats://127.0.0.1:port, for nats.Connect.
func (s *NATSServer) URL() string { return "nats://" + s.Addr() }

// Running reports whether the server process runs.
func (s *NATSServer) Running() bool { return s.proc.running() }

// Kill sends SIGKILL, as a crash would, and returns once the process has exited. Killing a
// stopped server does nothing.
func (s *NATSServer) Kill() {
	if err := s.proc.kill(); err != nil {
		s.t.Errorf("testkit: kill nats-server %s: %v", s.Addr(), err)
	}
}

// Stop shuts the server down gracefully (SIGTERM) and returns once the process has exited.
// A server still running after 15 s is killed and the test marked failed.
func (s *NATSServer) Stop() {
	if err := s.proc.stop(syscall.SIGTERM); err != nil {
		s.t.Errorf("testkit: stop nats-server %s: %v", s.Addr(), err)
	}
}

// Start starts the stopped server again on the same port with the same JetStream store and
// returns once a client can connect and JetStream answers. It fails the test if the server
// is running or does not come up.
func (s *NATSServer) Start() {
	s.t.Helper()
	url := s.URL()
	if err := s.proc.start(s.argv, func(ctx context.Context) error { return natsReady(ctx, url) }); err != nil {
		s.t.Fatalf("testkit: %v", err)
	}
}

// natsReady returns nil once the server at url accepts a client and its JetStream answers.
func natsReady(ctx context.Context, url string) error {
	nc, err := natsConnect(ctx, url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := nc.JetStream(nats.Context(ctx))
	if err != nil {
		return err
	}
	_, err = js.AccountInfo(nats.Context(ctx))
	return err
}

// natsConnect connects once, without reconnecting, within ctx's deadline (a second without one).
func natsConnect(ctx context.Context, url string) (*nats.Conn, error) {
	timeout := time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	return nats.Connect(url, nats.Timeout(timeout), nats.NoReconnect())
}
