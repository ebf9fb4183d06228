package testkit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRedisClusterSpreadsKeysAndRunsHashTaggedScripts(t *testing.T) {
	t.Parallel()
	cluster := StartRedisCluster(t)
	if got := len(cluster.Addrs()); got != 3 {
		t.Fatalf("Addrs() has %d addresses, want 3", got)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Enough keys to land on every master.
	masters := map[string]bool{}
	for i := range 30 {
		key := fmt.Sprintf("key-%d", i)
		if err := rdb.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		node, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatalf("master for %s: %v", key, err)
		}
		masters[node.Options().Addr] = true
	}
	if len(masters) != 3 {
		t.Fatalf("30 keys landed on %d masters, want 3: %v", len(masters), masters)
	}
	for i := range 30 {
		key := fmt.Sprintf("key-%d", i)
		if got, err := rdb.Get(ctx, key).Int(); err != nil || got != i {
			t.Fatalf("GET %s = %d, %v; want %d", key, got, err, i)
		}
	}

	script := redis.NewScript(`
		redis.call('SET', KEYS[1], ARGV[1])
		return redis.call('INCRBY', KEYS[2], ARGV[1])`)
	keys := []string{"voucher:{FLASH}:remaining", "voucher:{FLASH}:taken"}
	for want := 5; want <= 10; want += 5 {
		got, err := script.Run(ctx, rdb, keys, 5).Int()
		if err != nil || got != want {
			t.Fatalf("script = %d, %v; want %d", got, err, want)
		}
	}
}

// A replicated cluster starts with a replica under every master; SIGKILLing the master of a
// key's slot makes its replica the slot's master within a few node timeouts, and the key
// written before the kill (replicated with WAIT) is still there.
func TestReplicatedRedisClusterFailsOver(t *testing.T) {
	t.Parallel()
	started := time.Now()
	cluster := StartReplicatedRedisCluster(t)
	t.Logf("replicated cluster up in %s", time.Since(started).Round(time.Millisecond))
	if got := len(cluster.Addrs()); got != 6 {
		t.Fatalf("Addrs() has %d addresses, want 6", got)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const key = "{FAILOVER}:k"
	if err := rdb.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	master, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		t.Fatalf("master for %s: %v", key, err)
	}
	if n, err := master.Wait(ctx, 1, 5000).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 replica: %d, %v", n, err)
	}

	dead, slot := cluster.KillMasterOf(t, key)
	killed := time.Now()
	if dead != master.Options().Addr {
		t.Errorf("killed %s; the client says the master of %s is %s", dead, key, master.Options().Addr)
	}
	addr, at := cluster.WaitNewMaster(t, slot, dead, 20*time.Second)
	t.Logf("slot %d: %s killed, %s master after %s", slot, dead, addr, at.Sub(killed).Round(time.Millisecond))

	node := redis.NewClient(&redis.Options{Addr: addr})
	defer node.Close()
	if got, err := node.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Errorf("GET %s on the new master = %q, %v; want v", key, got, err)
	}
}
