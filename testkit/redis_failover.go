package testkit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// KeySlot returns the cluster hash slot of key, as a live node computes it (CLUSTER KEYSLOT).
func (c *RedisCluster) KeySlot(t testing.TB, key string) int {
	t.Helper()
	for _, n := range c.nodes {
		if !n.proc.running() {
			continue
		}
		slot, err := nodeCommand(n.addr, func(ctx context.Context, rdb *redis.Client) (int64, error) {
			return rdb.ClusterKeySlot(ctx, key).Result()
		})
		if err == nil {
			return int(slot)
		}
	}
	t.Fatalf("testkit: no live cluster node answered CLUSTER KEYSLOT %s", key)
	return 0
}

// MasterOf returns the address of the node that says of itself that it is the master of
// slot (the "myself,master" line of its CLUSTER NODES), or "" if no live node says so.
func (c *RedisCluster) MasterOf(slot int) string {
	for _, n := range c.nodes {
		if !n.proc.running() {
			continue
		}
		line, err := nodeCommand(n.addr, func(ctx context.Context, rdb *redis.Client) (string, error) {
			return rdb.ClusterNodes(ctx).Result()
		})
		if err == nil && selfServes(line, slot) {
			return n.addr
		}
	}
	return ""
}

// KillMasterOf SIGKILLs the node that is the master of key's slot and returns its address
// and the slot. The node stays dead until the test ends.
func (c *RedisCluster) KillMasterOf(t testing.TB, key string) (addr string, slot int) {
	t.Helper()
	slot = c.KeySlot(t, key)
	addr = c.MasterOf(slot)
	for _, n := range c.nodes {
		if n.addr == addr && addr != "" {
			if err := n.proc.kill(); err != nil {
				t.Fatalf("testkit: kill redis cluster node %s: %v", addr, err)
			}
			return addr, slot
		}
	}
	t.Fatalf("testkit: no live node is the master of slot %d (key %s)", slot, key)
	return "", 0
}

// RestartAsReplica starts again the node at addr, killed by KillMasterOf after its replica was
// promoted, and returns once it has rejoined as a replica of that new master and synced with
// it, as an operator's replacement would: until then the new master has no replica.
func (c *RedisCluster) RestartAsReplica(t testing.TB, addr string) {
	t.Helper()
	for _, n := range c.nodes {
		if n.addr != addr {
			continue
		}
		if err := n.proc.start(n.argv, redisReady(n.proc, addr)); err != nil {
			t.Fatalf("testkit: restart redis cluster node %s: %v", addr, err)
		}
		// it boots as the master its nodes.conf remembers, then learns it was failed over
		deadline := time.Now().Add(readyTimeout)
		for {
			info, err := nodeCommand(addr, func(ctx context.Context, rdb *redis.Client) (string, error) {
				return rdb.Info(ctx, "replication").Result()
			})
			if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") &&
				strings.Contains(info, "master_sync_in_progress:0") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("testkit: restarted node %s did not sync as a replica: %v %s", addr, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Fatalf("testkit: no redis cluster node %s", addr)
}

// WaitNewMaster returns the address of the live node that reports itself master of slot, and
// when it was first seen so (polled every 10ms), once that is not dead; it fails the test
// after timeout.
func (c *RedisCluster) WaitNewMaster(t testing.TB, slot int, dead string, timeout time.Duration) (string, time.Time) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if addr := c.MasterOf(slot); addr != "" && addr != dead {
			return addr, time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("testkit: no node took over slot %d from %s within %s", slot, dead, timeout)
	return "", time.Time{}
}

// selfServes reports whether the "myself" line of a CLUSTER NODES answer is a master whose
// slot ranges hold slot.
func selfServes(nodes string, slot int) bool {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		// <id> <ip:port@bus> <flags> <master> <ping-sent> <pong-recv> <epoch> <link> <slot>...
		if len(f) < 8 || !strings.Contains(f[2], "myself") || !strings.Contains(f[2], "master") {
			continue
		}
		for _, r := range f[8:] {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, errA := strconv.Atoi(lo)
			b, errB := strconv.Atoi(hi)
			if errA == nil && errB == nil && a <= slot && slot <= b {
				return true
			}
		}
	}
	return false
}

// nodeCommand runs one command on the node at addr with a short timeout and no retries.
func nodeCommand[T any](addr string, run func(context.Context, *redis.Client) (T, error)) (T, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, DialerRetries: 1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	v, err := run(ctx, rdb)
	if err != nil {
		return v, fmt.Errorf("%s: %w", addr, err)
	}
	return v, nil
}
