package testkit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestNATSClusterKeepsAReplicatedBucketWhenANodeDies(t *testing.T) {
	t.Parallel()
	start := time.Now()
	cluster := StartNATSCluster(t)
	t.Logf("three-node cluster up in %v", time.Since(start).Round(time.Millisecond))
	if got := strings.Count(cluster.URLs(), "nats://"); got != 3 {
		t.Fatalf("URLs() = %q; want three", cluster.URLs())
	}

	// A server list in one string, as VG_NATS_URL carries it.
	nc, err := nats.Connect(cluster.URLs(), nats.DontRandomize(), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to %s: %v", cluster.URLs(), err)
	}
	defer nc.Close()
	if got := cluster.Node(nc.ConnectedUrl()); got != 0 {
		t.Fatalf("connected to node %d (%s); want the first of the list", got, nc.ConnectedUrl())
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "survivor", History: 1, Replicas: 3})
	if err != nil {
		t.Fatalf("create R3 bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "before", []byte("1")); err != nil {
		t.Fatalf("put before the kill: %v", err)
	}

	cluster.Kill(0)
	// The client fails over to another node; the stream elects a leader among the two left.
	var put error
	Eventually(t, "a put after node 1's death", func() bool {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		_, put = kv.Put(pctx, "after", []byte("2"))
		return put == nil
	})
	if got := cluster.Node(nc.ConnectedUrl()); got <= 0 {
		t.Fatalf("still connected to %s after it died", nc.ConnectedUrl())
	}
	for key, want := range map[string]string{"before": "1", "after": "2"} {
		e, err := kv.Get(ctx, key)
		if err != nil || string(e.Value()) != want {
			t.Fatalf("get %s after the kill: %v, %v; want %s", key, e, err, want)
		}
	}
}
