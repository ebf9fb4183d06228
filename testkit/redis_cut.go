package testkit

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"

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

func iptables(op string, rule []string) (string, error) {
	out, err := exec.Command("iptables", append([]string{"-w", op}, rule...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("iptables %s: %w", op, err)
	}
	return string(out), nil
}
