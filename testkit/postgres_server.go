package testkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// postgresGlobs is where Debian keeps PostgreSQL's server binaries when they are not on PATH.
var postgresGlobs = []string{"/usr/lib/postgresql/*/bin/pg_ctl"}

// maxSocketDir keeps the unix socket path (dir + "/.s.PGSQL.NNNNN") under the kernel's
// 107-byte limit.
const maxSocketDir = 90

// PostgresServer is a throwaway PostgreSQL cluster (initdb, trust auth, user postgres,
// fsync off) on a free 127.0.0.1 port with its data and unix socket in temp dirs, for tests
// that kill and restart the database. It keeps its port and data across restarts, and
// whatever runs when the test ends is killed by PID.
//
// PostgreSQL refuses to run as root, so when the test runs as root the server and its tools
// run as the postgres system user and the temp dirs are handed to it.
//
// Kill and Stop may be called from any goroutine; Start fails the test with t.Fatal, so call
// it from the goroutine running the test.
type PostgresServer struct {
	t       testing.TB
	port    int
	binDir  string
	dataDir string
	workDir string
	cred    *syscall.Credential // nil unless running as root
	argv    []string
	proc    *process
}

// StartPostgres creates a database cluster, starts its postmaster and returns once it
// accepts queries. It fails the test if the PostgreSQL server binaries are missing or the
// server does not start.
func StartPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	pgCtl, err := filepath.EvalSymlinks(findBinary(t, "pg_ctl", "postgresql", postgresGlobs...))
	if err != nil {
		t.Fatalf("testkit: resolve pg_ctl: %v", err)
	}
	s := &PostgresServer{t: t, port: freePorts(t, 1)[0], binDir: filepath.Dir(pgCtl), workDir: t.TempDir()}
	for _, tool := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(s.binDir, tool)); err != nil {
			t.Fatalf("testkit: %s not found next to %s; install it with `apt-get install postgresql`", tool, pgCtl)
		}
	}
	s.dataDir = filepath.Join(s.workDir, "data")
	sockDir := filepath.Join(s.workDir, "sock")
	if len(sockDir) > maxSocketDir {
		sockDir = shortTempDir(t)
	}
	s.cred = postgresCredential(t, s.workDir, filepath.Dir(sockDir))
	for _, d := range []string{s.dataDir, sockDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatalf("testkit: %v", err)
		}
		s.chown(d)
	}
	s.run("initdb", "-D", s.dataDir, "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	s.argv = []string{filepath.Join(s.binDir, "postgres"),
		"-D", s.dataDir, "-p", strconv.Itoa(s.port), "-k", sockDir,
		"-c", "listen_addresses=127.0.0.1",
		// fsync and full-page writes only guard against an OS crash, which Kill is not.
		// synchronous_commit stays on: off would lose acknowledged commits on Kill.
		"-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "shared_buffers=32MB",
	}
	s.proc = newProcess(t, "postgres "+s.Addr(), s.cred)
	// Registered after newProcess so it runs first: the postmaster's children must be gone
	// before the temp dirs are removed.
	t.Cleanup(func() {
		if err := s.kill(); err != nil {
			t.Errorf("testkit: %v", err)
		}
	})
	s.Start()
	return s
}

// Addr returns the server's host:port, the same across restarts.
func (s *PostgresServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// URL returns postgres://postgres@127.0.0.1:port/postgres?sslmode=disable. Pass it to
// Database for a fresh database on this server.
func (s *PostgresServer) URL() string {
	return "postgres://postgres@" + s.Addr() + "/postgres?sslmode=disable"
}

// Running reports whether the postmaster runs.
func (s *PostgresServer) Running() bool { return s.proc.running() }

// Kill sends SIGKILL to the postmaster, as a crash would, and returns once it and the
// processes it had started have exited (they notice their parent died and quit), so Start
// may follow at once. Committed data survives; with fsync off the data would not survive a
// machine crash, which these tests do not simulate. Killing a stopped server does nothing.
func (s *PostgresServer) Kill() {
	if err := s.kill(); err != nil {
		s.t.Errorf("testkit: %v", err)
	}
}

func (s *PostgresServer) kill() error {
	pid := s.proc.pid()
	if pid == 0 {
		return nil
	}
	children := ChildPIDs(pid)
	if err := s.proc.kill(); err != nil {
		return fmt.Errorf("kill postgres %s: %w", s.Addr(), err)
	}
	deadline := time.Now().Add(stopTimeout)
	for _, c := range children {
		for processAlive(c) {
			if time.Now().After(deadline) {
				return fmt.Errorf("kill postgres %s: child pid %d still running after %s", s.Addr(), c, stopTimeout)
			}
			time.Sleep(pollInterval)
		}
	}
	return nil
}

// Stop shuts the server down with `pg_ctl stop -m fast` (sessions are ended, a checkpoint
// is written) and returns once the postmaster has exited. A failure is reported with
// t.Errorf and the server killed.
func (s *PostgresServer) Stop() {
	if !s.proc.running() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	out, err := s.command(ctx, "pg_ctl", "stop", "-D", s.dataDir, "-m", "fast", "-w").CombinedOutput()
	if err != nil {
		s.t.Errorf("testkit: pg_ctl stop %s: %v\n%s", s.Addr(), err, out)
		s.Kill()
		return
	}
	if err := s.proc.waitExited(); err != nil {
		s.t.Errorf("testkit: stop postgres: %v", err)
	}
}

// Start starts the stopped server again on the same port with the same data and returns
// once it accepts queries (after crash recovery, if it was killed). It fails the test if the
// server is running or does not come up.
func (s *PostgresServer) Start() {
	s.t.Helper()
	url := s.URL()
	ready := func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return conn.Ping(ctx)
	}
	if err := s.proc.start(s.argv, ready); err != nil {
		s.t.Fatalf("testkit: %v", err)
	}
}

// run runs a PostgreSQL tool from binDir as the server's user, failing the test on error.
func (s *PostgresServer) run(tool string, args ...string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if out, err := s.command(ctx, tool, args...).CombinedOutput(); err != nil {
		s.t.Fatalf("testkit: %s %s: %v\n%s", tool, strings.Join(args, " "), err, out)
	}
}

func (s *PostgresServer) command(ctx context.Context, tool string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.binDir, tool), args...)
	cmd.Dir = s.workDir // initdb and pg_ctl warn if they cannot enter the current dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd
}

func (s *PostgresServer) chown(path string) {
	s.t.Helper()
	if s.cred == nil {
		return
	}
	if err := os.Chown(path, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
		s.t.Fatalf("testkit: hand %s to the postgres user: %v", path, err)
	}
}

// postgresCredential returns nil when not root. As root it returns the postgres user's
// credential and lets that user pass through the given dirs: t.TempDir's dirs are 0700
// root.
func postgresCredential(t testing.TB, dirs ...string) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("testkit: PostgreSQL will not run as root and there is no postgres user (%v); install `postgresql` or run the tests as another user", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	for _, d := range dirs {
		allowTraverse(t, d)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
}

// allowTraverse adds search (x) permission for others to dir and its parents up to the
// system temp dir, so another user can reach a dir below it (not list or write it).
func allowTraverse(t testing.TB, dir string) {
	t.Helper()
	root := filepath.Clean(os.TempDir())
	for d := filepath.Clean(dir); strings.HasPrefix(d, root+string(filepath.Separator)); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatalf("testkit: %v", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				t.Fatalf("testkit: %v", err)
			}
		}
	}
}

// shortTempDir makes a temp dir with a short path (for a unix socket when t.TempDir's path
// is too long) and removes it when the test ends.
func shortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "vgpg")
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// ChildPIDs returns the PIDs of the processes whose parent is pid, read from /proc: how a test
// finds what a script it ran started in sessions of their own, to kill them by PID.
func ChildPIDs(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, ok := procStat(child); ok && ppid == pid {
			kids = append(kids, child)
		}
	}
	return kids
}

// processAlive reports whether pid runs (a zombie has exited and counts as gone).
func processAlive(pid int) bool {
	_, state, ok := procStat(pid)
	return ok && state != 'Z' && state != 'X'
}

// procStat reads the parent PID and state of pid from /proc/pid/stat.
func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses, so cut at the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	return ppid, fields[0][0], err == nil
}
