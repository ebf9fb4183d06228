package backendtest

import (
	"strings"
	"testing"
	"time"

	"vouchergate/backend/app"
	"vouchergate/shared/config"
	"vouchergate/testkit"
)

// Stack is vouchergate scaled out on free 127.0.0.1 ports, as issue 15 describes a deployment
// that outgrew one of each: a Redis Cluster of three masters with a replica each, a three-node
// NATS cluster holding the sold-out bucket in three replicas, one PostgreSQL database, two
// backend processes and two edge processes, each edge in front of both backends. Any of the
// processes can be SIGKILLed and started again.
//
// Checker is a backend in the test's own process on the same stores, prefixes and subjects,
// for the admin API and for reading both stores; its clock is the test's, so a test can run
// reconciliation past the grace period at once. Its jobs are off, as are the processes'.
type Stack struct {
	Redis    *testkit.RedisCluster
	NATS     *testkit.NATSCluster
	Checker  *Backend
	Clock    *testkit.OffsetClock
	Backends []*Process
	Edges    []*Process
	StartUp  time.Duration // from the first server started to the last edge answering
}

// StartStack starts a Stack. Its backends keep the production bounds a retry lives with: an
// outcome unknown after a fault is taken for stale after 2×VG_DB_TIMEOUT (2 s), and a retry
// waits VG_INFLIGHT_WAIT (1 s) for its first attempt, so a sale converges within seconds after
// a process dies.
func StartStack(t testing.TB) *Stack {
	t.Helper()
	start := time.Now()
	s := &Stack{Redis: testkit.StartReplicatedRedisCluster(t), NATS: testkit.StartNATSCluster(t), Clock: &testkit.OffsetClock{}}
	cfg := Config(t)
	cfg.RedisClusterAddrs = s.Redis.Addrs()
	cfg.NATSURL, cfg.NATSReplicas = s.NATS.URLs(), 3
	cfg.DBTimeout, cfg.InFlightWait = time.Second, time.Second
	s.Checker = Start(t, cfg, app.WithClock(s.Clock))

	// Each backend takes a third of the database's test connections at most: with the checker's
	// they stay within what a package running beside others may use.
	extra := []string{"VG_DB_TIMEOUT=1s", "VG_INFLIGHT_WAIT=1s", "VG_DB_MAX_CONNS=8", "VG_REQUEST_TIMEOUT=10s"}
	var addrs []string
	for range 2 {
		p := StartProcess(t, cfg, extra...)
		s.Backends = append(s.Backends, p)
		addrs = append(addrs, p.Addr())
	}
	for range 2 {
		s.Edges = append(s.Edges, StartEdgeProcess(t, cfg, strings.Join(addrs, ",")))
	}
	s.StartUp = time.Since(start)
	return s
}

// Config returns the settings every part of the stack shares (database, prefixes, servers).
func (s *Stack) Config() config.Backend { return s.Checker.Config }
