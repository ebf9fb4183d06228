package testkit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// RedisOption changes how StartRedis runs its server.
type RedisOption func(*redisConfig)

type redisConfig struct {
	persistent bool
	replicaOf  string   // host:port of the master, or ""
	extra      []string // more redis-server arguments
}

// RedisPersistent makes the server append every write to an append-only file and fsync it
// before answering (appendonly yes, appendfsync always), so after Kill and Start it holds
// every write it acknowledged. Without it the server keeps nothing on disk and always
// comes back empty.
func RedisPersistent() RedisOption {
	return func(c *redisConfig) { c.persistent = true }
}

// RedisArgs passes more arguments to redis-server, after the harness's own: for example
// "--rename-command", "CONFIG", "" for a Redis whose CONFIG is disabled, as managed services
// run it.
func RedisArgs(args ...string) RedisOption {
	return func(c *redisConfig) { c.extra = append(c.extra, args...) }
}

// RedisReplicaOf makes the server a replica of the Redis at master (host:port): StartRedis
// returns once it has synced with it, so a master's WAIT 1 is answered. Cut their link with
// CutReplication(t, master).
func RedisReplicaOf(master string) RedisOption {
	return func(c *redisConfig) { c.replicaOf = master }
}

// RedisServer is a throwaway standalone redis-server on a free 127.0.0.1 port with its data
// dir in a temp dir, for tests that kill and restart Redis. It keeps its port across
// restarts, and whatever runs when the test ends is killed by PID.
//
// Kill and Stop may be called from any goroutine; Start and RestartEmpty fail the test
// with t.Fatal, so call them from the goroutine running the test.
type RedisServer struct {
	t       testing.TB
	port    int
	dataDir string
	argv    []string
	proc    *process
}

// StartRedis starts a redis-server and returns once it answers PING. It fails the test if
// redis-server is missing or does not start.
func StartRedis(t testing.TB, opts ...RedisOption) *RedisServer {
	t.Helper()
	var cfg redisConfig
	for _, o := range opts {
		o(&cfg)
	}
	bin := findBinary(t, "redis-server", "redis-server")
	s := &RedisServer{t: t, port: freePorts(t, 1)[0], dataDir: t.TempDir()}
	s.argv = []string{bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--dir", s.dataDir, "--save", "",
		"--daemonize", "no", "--logfile", "",
		// a replica's first sync starts at once, not after the 5 s a master waits for more
		"--repl-diskless-sync-delay", "0",
	}
	if cfg.persistent {
		s.argv = append(s.argv, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		s.argv = append(s.argv, "--appendonly", "no")
	}
	if cfg.replicaOf != "" {
		host, port, _ := strings.Cut(cfg.replicaOf, ":")
		s.argv = append(s.argv, "--replicaof", host, port)
	}
	s.argv = append(s.argv, cfg.extra...)
	s.proc = newProcess(t, "redis-server "+s.Addr(), nil)
	s.Start()
	if cfg.replicaOf != "" {
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		defer cancel()
		if err := waitReplicaSynced(ctx, s.Addr()); err != nil {
			t.Fatalf("testkit: replica of %s did not sync: %v", cfg.replicaOf, err)
		}
	}
	return s
}

// Addr returns the server's host:port, the same across restarts.
func (s *RedisServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// URL returns redis://127.0.0.1:port/0, for redis.ParseURL.
func (s *RedisServer) URL() string { return "redis://" + s.Addr() + "/0" }

// Running reports whether the server process runs.
func (s *RedisServer) Running() bool { return s.proc.running() }

// Kill sends SIGKILL, as a crash would, and returns once the process has exited. Writes not
// yet on disk are lost. Killing a stopped server does nothing.
func (s *RedisServer) Kill() {
	if err := s.proc.kill(); err != nil {
		s.t.Errorf("testkit: kill redis-server %s: %v", s.Addr(), err)
	}
}

// Stop shuts the server down gracefully (SIGTERM: clients are closed, the append-only file
// is flushed) and returns once the process has exited. A server still running after 15 s
// is killed and the test marked failed.
func (s *RedisServer) Stop() {
	if err := s.proc.stop(syscall.SIGTERM); err != nil {
		s.t.Errorf("testkit: stop redis-server %s: %v", s.Addr(), err)
	}
}

// Start starts the stopped server again on the same port with the data its dir holds (none
// unless RedisPersistent was given) and returns once it answers PING, so its data is loaded.
// It fails the test if the server is running or does not come up.
func (s *RedisServer) Start() {
	s.t.Helper()
	addr := s.Addr()
	if err := s.proc.start(s.argv, redisReady(s.proc, addr)); err != nil {
		s.t.Fatalf("testkit: %v", err)
	}
}

// RestartEmpty kills the server if it runs, deletes everything in its data dir, and starts
// it again on the same port: a Redis that came back having lost every key.
func (s *RedisServer) RestartEmpty() {
	s.t.Helper()
	s.Kill()
	entries, err := os.ReadDir(s.dataDir)
	if err != nil {
		s.t.Fatalf("testkit: wipe redis data dir: %v", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(s.dataDir, e.Name())); err != nil {
			s.t.Fatalf("testkit: wipe redis data dir: %v", err)
		}
	}
	s.Start()
}
