package app_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/events"
	"vouchergate/testkit"
)

// clusterSale is a flash sale on a three-node NATS cluster: one backend, the bucket of three
// replicas, and the granted orders of each voucher sold out so far.
type clusterSale struct {
	b      *backendtest.Backend
	grants atomic.Int64 // uses granted so far
	mu     sync.Mutex
	sold   []string            // voucher codes, in the order they were created
	taken  map[string][]string // code -> granted orderIds
}

// sell creates a flash voucher of total uses and sells every use straight at the backend
// (never through an edge, so that an edge can learn of the sell-out only over NATS).
func (s *clusterSale) sell(t *testing.T, code string, total int) {
	t.Helper()
	s.b.CreateVoucher(t, backendtest.Voucher{Code: code, Discount: 5000, TotalLimit: total, FlashSale: true})
	var granted []string
	for i := range total {
		order := fmt.Sprintf("%s-order-%d", code, i)
		if status, body := s.b.Reserve(t, code, fmt.Sprintf("%s-cust-%d", code, i), order, 100000); status != 201 {
			t.Errorf("reservation %d of %s: %d %s", i+1, code, status, body)
			return
		}
		granted = append(granted, order)
		s.grants.Add(1)
	}
	s.mu.Lock()
	s.sold = append(s.sold, code)
	s.taken[code] = granted
	s.mu.Unlock()
}

// A NATS node dies mid-sale (issue 15): the edges keep learning sell-outs through the other
// two nodes, and an edge started afterwards reads every one from the replicated bucket.
func TestANATSNodeKilledMidSale(t *testing.T) {
	cluster := testkit.StartNATSCluster(t)
	cfg := backendtest.Config(t)
	cfg.NATSURL, cfg.NATSReplicas = cluster.URLs(), 3
	sale := &clusterSale{b: backendtest.Start(t, cfg), taken: map[string][]string{}}

	// Only NATS may tell these edges: entries never expire nor refresh, and no order passes
	// through them until they have learned.
	edgeOn := func(urls string, front *front) *edge {
		ecfg := edgeConfig(urls, cfg.NATSPrefix, front.Addr)
		ecfg.NATSReplicas = 3
		ecfg.SoldOutTTL, ecfg.SoldOutRefresh = 10*time.Minute, 0
		e := startEdge(t, ecfg)
		t.Cleanup(func() {
			if t.Failed() {
				l := e.App.Listener
				t.Logf("edge on %q: connected %v, %d reads of the bucket, %d states applied, %d stale",
					l.ConnectedURL(), l.Connected(), l.Syncs(), l.Applied(), l.Stale())
			}
		})
		return e
	}
	front1, front2 := startFront(t, sale.b.Addr), startFront(t, sale.b.Addr)
	e1 := edgeOn(cluster.URLs(), front1)
	testkit.Eventually(t, "edge 1 connected to NATS", func() bool { return e1.App.Listener.Connected() })
	doomed := cluster.Node(e1.App.Listener.ConnectedURL())
	if doomed < 0 {
		t.Fatalf("edge 1 is connected to %q, not a node of the cluster", e1.App.Listener.ConnectedURL())
	}
	// Edge 2 gets the two other nodes, so it sits on another node than edge 1 whichever it picks.
	var others []int
	for i := range 3 {
		if i != doomed {
			others = append(others, i)
		}
	}
	e2 := edgeOn(cluster.URLs(others...), front2)
	testkit.Eventually(t, "edge 2 connected to NATS", func() bool { return e2.App.Listener.Connected() })
	t.Logf("edge 1 on %s (to be killed), edge 2 on %s, the backend on %s", cluster.Name(doomed),
		e2.App.Listener.ConnectedURL(), sale.b.App.NATS.ConnectedUrl())

	for i := range 3 {
		sale.sell(t, fmt.Sprintf("BEFORE%d", i), 3)
	}
	checkReplicas(t, cluster.URLs(), cfg.NATSPrefix, 3)
	learnedFromMemory(t, sale, []*edge{e1, e2}, []*front{front1, front2})

	// Mid-sale: vouchers selling out on four goroutines while the node dies.
	before := sale.grants.Load()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sale.sell(t, fmt.Sprintf("DURING%d", i), 5)
		}()
	}
	testkit.Eventually(t, "the sale under way", func() bool { return sale.grants.Load() >= before+4 })
	cluster.Kill(doomed)
	killed := time.Now()
	wg.Wait()
	for i := range 3 {
		sale.sell(t, fmt.Sprintf("AFTER%d", i), 3)
	}
	if t.Failed() {
		t.FailNow()
	}
	learnedFromMemory(t, sale, []*edge{e1, e2}, []*front{front1, front2})
	t.Logf("both edges knew every sell-out %v after the kill", time.Since(killed).Round(time.Millisecond))
	if got := cluster.Node(e1.App.Listener.ConnectedURL()); got == doomed || got < 0 {
		t.Fatalf("edge 1 is on %q after node %s died", e1.App.Listener.ConnectedURL(), cluster.Name(doomed))
	}

	// A new edge reads every sell-out from the two replicas left, at start.
	front3 := startFront(t, sale.b.Addr)
	e3 := edgeOn(cluster.URLs(), front3)
	select {
	case <-e3.App.Listener.Synced():
	case <-time.After(testkit.WaitBound):
		t.Fatalf("the new edge did not read the bucket within %v", testkit.WaitBound)
	}
	for _, code := range sale.sold {
		if !e3.knows(code) {
			t.Errorf("the edge started after the kill does not know %s is sold out after its first read of the bucket", code)
		}
	}
	if n := front3.reserves.Load() + front3.others.Load(); n != 0 {
		t.Errorf("the new edge sent %d requests to the backend; want none (it must learn from the bucket)", n)
	}

	// Every granted order's retry passes every edge and gets its 201 again; both stores agree.
	for _, code := range sale.sold {
		for i, order := range sale.taken[code] {
			for k, e := range []*edge{e1, e2, e3} {
				if a := e.reserve(t, code, fmt.Sprintf("%s-cust-%d", code, i), order); a.Status != 201 {
					t.Fatalf("retry of granted %s through edge %d: %d %s", order, k+1, a.Status, a.Body)
				}
			}
		}
		sale.b.CheckInvariants(t, code, sale.taken[code])
	}
}

// learnWithin bounds how long an edge may take to learn a sell-out after a NATS node died:
// the bucket's stream elects a new leader first (the backend's writes wait for it, ~5 s
// here), then an edge whose watch's consumer lived on the dead node sees it fall behind within
// two checks (listen.checkWatch, 2 s apart) and watches again. Seen up to 13 s here under
// -race; without the check, nats.go's own recovery took 10, 20 or 30 s.
const learnWithin = 60 * time.Second

// learnedFromMemory waits until every edge knows every voucher sold so far is sold out, then
// checks that a new order of each gets 409 from the edge's memory: nothing reaches the backend.
func learnedFromMemory(t *testing.T, sale *clusterSale, edges []*edge, fronts []*front) {
	t.Helper()
	for k, e := range edges {
		for _, code := range sale.sold {
			testkit.EventuallyWithin(t, learnWithin, fmt.Sprintf("edge %d learns %s is sold out", k+1, code),
				func() bool { return e.knows(code) })
		}
	}
	for k, e := range edges {
		before := fronts[k].reserves.Load() + fronts[k].others.Load()
		for _, code := range sale.sold {
			if a := e.reserve(t, code, "late-"+code, fmt.Sprintf("late-%s-%d", code, k)); a.Status != 409 {
				t.Fatalf("new order of sold-out %s through edge %d: %d %s", code, k+1, a.Status, a.Body)
			}
		}
		if n := fronts[k].reserves.Load() + fronts[k].others.Load() - before; n != 0 {
			t.Fatalf("edge %d sent %d of its 409s' requests to the backend; want none (answered from memory)", k+1, n)
		}
	}
}

// checkReplicas fails the test unless the sold-out bucket's stream keeps want replicas.
func checkReplicas(t *testing.T, urls, prefix string, want int) {
	t.Helper()
	nc, err := nats.Connect(urls)
	if err != nil {
		t.Fatalf("connect to %s: %v", urls, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bucket := events.Names{Prefix: prefix}.StateBucket()
	stream, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		t.Fatalf("stream of bucket %s: %v", bucket, err)
	}
	if got := stream.CachedInfo().Config.Replicas; got != want {
		t.Fatalf("bucket %s keeps %d replicas; want %d", bucket, got, want)
	}
}
