package testkit

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterMasters is the number of masters in a RedisCluster: the fewest redis-cli accepts.
const clusterMasters = 3

// RedisCluster is a throwaway Redis Cluster of three masters, with or without one replica
// each, on free 127.0.0.1 ports, with no persistence. It lives until the test ends.
type RedisCluster struct {
	nodes    []clusterNode
	replicas bool
}

// clusterNode is one redis-server of a RedisCluster.
type clusterNode struct {
	addr string
	argv []string
	proc *process
}

// StartRedisCluster starts three cluster-enabled redis-server processes, joins them with
// `redis-cli --cluster create`, and returns once every node reports cluster_state:ok and
// knows all masters, so a ClusterClient built from Addrs works at once. Every process is
// killed by PID when the test ends. It fails the test if redis-server or redis-cli is
// missing or the cluster does not form.
func StartRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	return startRedisCluster(t, false, 5*time.Second)
}

// StartReplicatedRedisCluster starts three masters with one replica each and a node timeout
// of one second, so that a replica takes over a dead master's slots about two seconds after
// the master dies. It returns once every node reports cluster_state:ok and knows all six
// nodes, and every replica's link to its master is up and in sync.
func StartReplicatedRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	return startRedisCluster(t, true, time.Second)
}

func startRedisCluster(t testing.TB, replicas bool, nodeTimeout time.Duration) *RedisCluster {
	t.Helper()
	server := findBinary(t, "redis-server", "redis-server")
	cli := findBinary(t, "redis-cli", "redis-tools")
	n := clusterMasters
	if replicas {
		n *= 2
	}
	c := &RedisCluster{replicas: replicas}
	for range n {
		c.nodes = append(c.nodes, startClusterNode(t, server, replicas, nodeTimeout))
	}

	all := make([]string, 0, n)
	for _, node := range c.nodes {
		all = append(all, node.addr)
	}
	args := append([]string{"--cluster", "create"}, all...)
	args = append(args, "--cluster-replicas", map[bool]string{false: "0", true: "1"}[replicas], "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("testkit: redis-cli --cluster create %s: %v\n%s", strings.Join(all, " "), err, out)
	}
	for _, addr := range all {
		if err := waitClusterOK(ctx, addr, n); err != nil {
			t.Fatalf("testkit: redis cluster did not form: %v\nredis-cli said:\n%s", err, out)
		}
	}
	if replicas {
		for _, addr := range all {
			if err := waitReplicaSynced(ctx, addr); err != nil {
				t.Fatalf("testkit: redis cluster replicas did not attach: %v\nredis-cli said:\n%s", err, out)
			}
		}
	}
	return c
}

// startClusterNode starts one cluster-enabled redis-server on ports of its own. Each node needs a
// client port and a cluster bus port; the bus port is set explicitly (cluster-port) rather than
// left at port+10000, which may be taken or out of range. Should another process take a port
// between its choice and the bind, the node is started again on new ones.
func startClusterNode(t testing.TB, server string, replicas bool, nodeTimeout time.Duration) clusterNode {
	t.Helper()
	var err error
	for range 3 {
		ports := freePorts(t, 2)
		port, busPort := ports[0], ports[1]
		dir := t.TempDir()
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		argv := []string{server,
			"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(busPort),
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
			"--dir", dir, "--save", "", "--appendonly", "no",
			"--daemonize", "no", "--logfile", "",
		}
		if replicas {
			// The other masters keep serving their slots while one has none, as a sale on
			// several shards needs (by default every node refuses every slot meanwhile).
			argv = append(argv, "--cluster-require-full-coverage", "no")
			// A replica's first sync starts at once, not after the 5 s a master waits by
			// default for more replicas to share one transfer.
			argv = append(argv, "--repl-diskless-sync-delay", "0")
		}
		p := newProcess(t, "redis cluster node "+addr, nil)
		if err = p.start(argv, redisReady(p, addr)); err == nil {
			return clusterNode{addr: addr, argv: argv, proc: p}
		}
	}
	t.Fatalf("testkit: %v", err)
	return clusterNode{}
}

// Addrs returns the masters' host:port addresses as the cluster was created (with replicas,
// every node's), for redis.ClusterOptions.Addrs.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, 0, len(c.nodes))
	for _, n := range c.nodes {
		addrs = append(addrs, n.addr)
	}
	return addrs
}

// waitClusterOK returns once the node at addr sees every slot served and all n nodes, or ctx
// ends.
func waitClusterOK(ctx context.Context, addr string, n int) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	var last string
	for {
		info, err := rdb.ClusterInfo(ctx).Result()
		if err == nil {
			last = info
			if strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) &&
				strings.Contains(info, "cluster_slots_ok:16384") {
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: CLUSTER INFO still says: %s", addr, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitReplicaSynced returns at once for a master, and for a replica once its link to its
// master is up and the first sync is done, or ctx ends.
func waitReplicaSynced(ctx context.Context, addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	var last string
	for {
		info, err := rdb.Info(ctx, "replication").Result()
		if err == nil {
			last = info
			if strings.Contains(info, "role:master") ||
				(strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0")) {
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: INFO replication still says: %s", addr, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// redisReady is a process's readiness for a redis-server started on addr: it answers PING with
// PONG (not LOADING), and it is that process. A port freed by freePorts can be taken by another
// test's server before this one binds it; this one then exits, and the other's PONG must not
// pass for its own.
func redisReady(p *process, addr string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
		defer rdb.Close()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return err
		}
		info, err := rdb.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		_, rest, _ := strings.Cut(info, "process_id:")
		pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
		if pid != p.pid() {
			return fmt.Errorf("%s is answered by another process (pid %d), not %s", addr, pid, p.name)
		}
		return nil
	}
}
