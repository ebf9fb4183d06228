package testkit

import (
	"strings"
	"testing"
)

// A redis-server whose port another server took before it could bind exits, and the other
// server's PONG must not pass for its readiness (seen once in CI: a cluster node's port taken
// by another test's node, whose answers made the cluster's creation fail as "not empty").
func TestARedisOnATakenPortIsNotTakenForReady(t *testing.T) {
	t.Parallel()
	other := StartRedis(t)
	port := strings.TrimPrefix(other.Addr(), "127.0.0.1:")
	argv := []string{findBinary(t, "redis-server", "redis-server"),
		"--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--logfile", ""}
	p := newProcess(t, "redis-server on a taken port", nil)
	err := p.start(argv, redisReady(p, other.Addr()))
	if err == nil {
		t.Fatalf("a redis-server on %s (taken by pid %d's server) was taken for ready", other.Addr(), other.proc.pid())
	}
}
