package quota

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/testkit"
)

// The breaker is per node: a node found unreachable is skipped for the backoff, then one caller
// tries it (the others skip it for one more backoff), and an answer closes it; other nodes are
// never skipped meanwhile.
func TestBreakerPerNode(t *testing.T) {
	clock := testkit.NewManualClock(time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC))
	b := newBreaker(time.Second, clock)
	if b.anyOpen() || b.skip("a") {
		t.Fatal("a new breaker skips")
	}
	b.failed("a")
	if !b.anyOpen() || !b.skip("a") || b.skip("b") {
		t.Fatal("after a failed: a must be skipped, b not")
	}
	clock.Advance(time.Second)
	if b.skip("a") {
		t.Fatal("after the backoff the first caller must try a")
	}
	if !b.skip("a") {
		t.Fatal("while one tries a, the others must skip it")
	}
	clock.Advance(time.Second)
	if b.skip("a") {
		t.Fatal("a try that never reported leaves the next backoff's first caller to try")
	}
	b.answered("a")
	if b.anyOpen() || b.skip("a") {
		t.Fatal("an answer must close the breaker")
	}
}

// What counts as Redis not reached: connection and timeout failures and servers not serving,
// not a script's error nor a replica that did not acknowledge.
func TestUnreachable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{fmt.Errorf("deduct k: %w: %w", ErrUnavailable, io.EOF), true},
		{redis.ErrPoolTimeout, true},
		{redis.ErrClosed, true},
		{fmt.Errorf("deduct: %w", ErrNotReplicated), false},
		{fmt.Errorf("deduct k: %w: %w", ErrUnavailable, errGivingBack), false},
		{errors.New("ERR Error running script"), false},
		{nil, false},
	} {
		if got := unreachable(c.err); got != c.want {
			t.Errorf("unreachable(%v) = %v; want %v", c.err, got, c.want)
		}
	}
}

// On a cluster whose slot map cannot name a key's node (all nodes unreachable, CLUSTERDOWN), a
// failure opens the breaker for the unnamed node ""; the next answer, which names its node,
// closes that entry too, so the healthy path stops looking up nodes.
func TestBreakerClosesAnUnnamedNodeOnAnAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cluster := testkit.StartRedisCluster(t)
	live := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { live.Close() })
	dead := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	clock := testkit.NewManualClock(time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC))
	sc := scripts{rdb: dead, cluster: true, breaker: newBreaker(time.Second, clock)}
	const key = "{1:USER:u}:x"
	if node := sc.nodeOf(t.Context(), key); node != "" {
		t.Fatalf("a cluster client reaching no node names %q for the key; want \"\"", node)
	}
	sc.observe(t.Context(), key, io.EOF)
	if !sc.breaker.anyOpen() {
		t.Fatal("a failure on an unnamed node must open the breaker")
	}
	sc.rdb = live
	if node := sc.nodeOf(t.Context(), key); node == "" {
		t.Fatal("the live cluster does not name the key's node")
	}
	sc.observe(t.Context(), key, nil)
	if sc.breaker.anyOpen() {
		t.Fatal("an answer on the cluster left the unnamed node's entry open: every call keeps looking up its node")
	}
}
