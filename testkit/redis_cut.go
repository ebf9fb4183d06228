package testkit

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// CutReplication drops every packet between the master at addr and its replicas' replication
// connections, with loopback iptables rules, so the master goes on accepting writes that no
// replica receives (pausing a replica is not enough: its socket buffer would still take them).
// The cluster bus is left alone, so a replica is still promoted when the master dies. The
// returned function removes the rules; it also runs when the test ends, on every path. Needs
// root and iptables (apt-get install iptables).
func (c *RedisCluster) CutReplication(t testing.TB, addr string) (restore func()) {
	t.Helper()
	return CutReplication(t, addr)
}

// CutReplication is RedisCluster.CutReplication for any Redis master at addr, such as a
// StartRedis server with a RedisReplicaOf replica.
func CutReplication(t testing.TB, addr string) (restore func()) {
	t.Helper()
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Fatalf("testkit: cut replication: iptables is not installed (apt-get install iptables): %v", err)
	}
	list, err := nodeCommand(addr, func(ctx context.Context, rdb *redis.Client) (string, error) {
		return rdb.Do(ctx, "CLIENT", "LIST", "TYPE", "replica").Text()
	})
	if err != nil {
		t.Fatalf("testkit: cut replication: list the replicas of %s: %v", addr, err)
	}
	_, masterPort, _ := strings.Cut(addr, ":")
	var rules [][]string
	for line := range strings.SplitSeq(strings.TrimSpace(list), "\n") {
		for field := range strings.FieldsSeq(line) {
			if peer, ok := strings.CutPrefix(field, "addr="); ok {
				_, port, _ := strings.Cut(peer, ":")
				rules = append(rules,
					[]string{"OUTPUT", "-o", "lo", "-p", "tcp", "--sport", masterPort, "--dport", port, "-j", "DROP"},
					[]string{"OUTPUT", "-o", "lo", "-p", "tcp", "--sport", port, "--dport", masterPort, "-j", "DROP"})
			}
		}
	}
	if len(rules) == 0 {
		t.Fatalf("testkit: cut replication: %s has no replica connected (CLIENT LIST: %q)", addr, list)
	}
	var added [][]string
	var once sync.Once
	restore = func() {
		once.Do(func() {
			for _, r := range added {
				if out, err := iptables("-D", r); err != nil {
					t.Errorf("testkit: remove iptables rule %v: %v: %s", r, err, out)
				}
			}
		})
	}
	t.Cleanup(restore)
	for _, r := range rules {
		if out, err := iptables("-I", r); err != nil {
			t.Fatalf("testkit: cut replication of %s: iptables -I %v: %v: %s", addr, r, err, out)
		}
		added = append(added, r)
	}
	return restore
}

// WaitReplicated returns once every replica of the master at addr has applied all the master
// had written when it was called (its replication offset), so a cut that follows holds back
// only what comes after. It fails the test if that takes longer than the ready timeout.
func WaitReplicated(t testing.TB, addr string) {
	t.Helper()
	info, err := nodeCommand(addr, func(ctx context.Context, rdb *redis.Client) (string, error) {
		return rdb.Info(ctx, "replication").Result()
	})
	if err != nil {
		t.Fatalf("testkit: wait for replication: read INFO replication of %s: %v", addr, err)
	}
	target := infoInt(info, "master_repl_offset")
	var replicas []string
	for line := range strings.SplitSeq(info, "\n") {
		// slave0:ip=127.0.0.1,port=6380,state=online,offset=1234,lag=0
		if !strings.HasPrefix(line, "slave") || !strings.Contains(line, ":ip=") {
			continue
		}
		var ip, port string
		_, fields, _ := strings.Cut(strings.TrimSpace(line), ":")
		for kv := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "ip":
				ip = v
			case "port":
				port = v
			}
		}
		replicas = append(replicas, ip+":"+port)
	}
	if len(replicas) == 0 {
		t.Fatalf("testkit: wait for replication: %s has no replica connected", addr)
	}
	for _, r := range replicas {
		deadline := time.Now().Add(readyTimeout)
		for {
			info, err := nodeCommand(r, func(ctx context.Context, rdb *redis.Client) (string, error) {
				return rdb.Info(ctx, "replication").Result()
			})
			if err == nil && infoInt(info, "slave_repl_offset") >= target {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("testkit: replica %s of %s did not reach offset %d: %v %s", r, addr, target, err, info)
			}
			time.Sleep(pollInterval)
		}
	}
}

// infoInt reads an integer field of an INFO answer (-1 when absent).
func infoInt(info, name string) int64 {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

func iptables(op string, rule []string) (string, error) {
	out, err := exec.Command("iptables", append([]string{"-w", op}, rule...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("iptables %s: %w", op, err)
	}
	return string(out), nil
}
