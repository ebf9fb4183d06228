package notify_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"vouchergate/backend/gate"
	"vouchergate/backend/notify"
	"vouchergate/backend/voucher"
	"vouchergate/edge/listen"
	"vouchergate/edge/soldout"
	"vouchergate/shared/events"
	"vouchergate/testkit"
)

// pausing is a Reader whose first complete read of a state blocks, after reading, until
// resumed: the notifier holds a state read from Redis and has not yet written it.
type pausing struct {
	notify.Reader
	once   sync.Once
	read   chan struct{} // closed once the first read is done
	resume chan struct{} // close to let it return
	late   bool          // the read's context expired during the pause
}

func newPausing(r notify.Reader) *pausing {
	return &pausing{Reader: r, read: make(chan struct{}), resume: make(chan struct{})}
}

func (p *pausing) hold(ctx context.Context) {
	p.once.Do(func() {
		close(p.read)
		<-p.resume
		p.late = ctx.Err() != nil
	})
}

func (p *pausing) Snapshot(ctx context.Context, code string) (notify.Snapshot, error) {
	snap, err := p.Reader.Snapshot(ctx, code)
	p.hold(ctx)
	return snap, err
}

func redisClient(t *testing.T) *redis.Client { return testkit.Redis(t) }

func natsConn(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(testkit.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func startEdge(t *testing.T, names events.Names) (*listen.Listener, *soldout.Cache) {
	t.Helper()
	cache := soldout.New(soldout.Options{TTL: time.Minute})
	t.Cleanup(cache.Close)
	l, err := listen.Start(listen.Options{URL: testkit.NATSURL, Names: names, RetryEvery: 100 * time.Millisecond}, cache, testkit.QuietLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	select {
	case <-l.Synced():
	case <-time.After(testkit.WaitBound):
		t.Fatal("edge never read the bucket")
	}
	return l, cache
}

// mayHold reports whether the edge answers code as sold out while forwarding orderID's retry.
func mayHold(c *soldout.Cache, code, orderID string) (soldOut, forwarded bool) {
	e, _ := c.Lookup([]byte(code), time.Now())
	if e == nil {
		return false, true
	}
	return true, e.MayHold([]byte(orderID))
}

// Issue 9, item 2. L takes the last use; backend B1 reads {sold out, holders {L}} and stalls
// before writing it; on B2, L's write fails and is compensated and B2 says back in stock; N
// takes the last use and B2 says {sold out, holders {N}}; then B1's stale state is written.
// The newest state must win in the bucket, at an edge that was listening, and at an edge
// started afterwards: the granted N is forwarded, not answered 409.
func TestStaleStateFromAStalledBackendLosesToANewerOne(t *testing.T) {
	const code = "RACE"
	ctx := context.Background()
	rdb := redisClient(t)
	g := gate.New(rdb, testkit.RedisPrefix(t))
	names := events.Names{Prefix: testkit.NATSPrefix()}
	v := voucher.Voucher{Code: code, TotalLimit: 1, PerUserLimit: 1}
	if _, err := g.Load(ctx, v, nil); err != nil {
		t.Fatal(err)
	}
	nc2 := natsConn(t)
	t.Cleanup(func() { deleteBucket(nc2, names) })
	_, edge := startEdge(t, names) // listening throughout; creates the bucket

	stalled := newPausing(g)
	b1, err := notify.New(natsConn(t), names, 1, stalled, time.Hour, testkit.QuietLog)
	if err != nil {
		t.Fatal(err)
	}
	defer b1.Close()
	b2, err := notify.New(nc2, names, 1, g, time.Hour, testkit.QuietLog)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()

	// L takes the last use; B1 reads the sell-out and stalls.
	holderL := voucher.Holder{CustomerID: "c-l", ReservedAt: time.Now(), Attempt: "l1"}
	if r, err := g.Reserve(ctx, v, "L", holderL); err != nil || r.Outcome != voucher.GateReserved || r.Remaining != 0 {
		t.Fatalf("L reserves the last use: %+v %v", r, err)
	}
	b1.SoldOut(code)
	<-stalled.read

	// On B2, L's write fails and is compensated: back in stock.
	if released, remaining, err := g.Release(ctx, code, "L", &holderL); err != nil || !released || remaining != 1 {
		t.Fatalf("compensate L: %v %d %v", released, remaining, err)
	}
	b2.BackInStock(code)
	testkit.Eventually(t, "B2's back in stock in the bucket", func() bool {
		s, ok := bucketState(t, nc2, names, code)
		return ok && !s.SoldOut
	})

	// N takes the last use; B2 says sold out with N holding it.
	holderN := voucher.Holder{CustomerID: "c-n", ReservedAt: time.Now(), Attempt: "n1"}
	if r, err := g.Reserve(ctx, v, "N", holderN); err != nil || r.Outcome != voucher.GateReserved || r.Remaining != 0 {
		t.Fatalf("N reserves the last use: %+v %v", r, err)
	}
	b2.SoldOut(code)
	testkit.Eventually(t, "B2's sell-out in the bucket", func() bool {
		s, ok := bucketState(t, nc2, names, code)
		return ok && s.SoldOut
	})
	if s, _ := bucketState(t, nc2, names, code); !s.Holders.MayHold([]byte("N")) {
		t.Fatal("B2's sell-out does not name N")
	}
	testkit.Eventually(t, "the edge learns B2's sell-out", func() bool {
		soldOut, fwd := mayHold(edge, code, "N")
		return soldOut && fwd
	})

	// B1 wakes and writes what it read; Close waits for its write.
	close(stalled.resume)
	b1.Close()
	if stalled.late {
		t.Log("B1's stall outlasted its publish timeout: its stale write was never tried")
	}
	// Everything written before the marker has reached the listening edge once the marker has.
	mark := events.VoucherState{Code: "MARK", SoldOut: true, At: time.Now().UTC(), Holders: events.NewHolderFilter(nil)}
	putRaw(t, nc2, names, mark)
	testkit.Eventually(t, "the edge reads the marker", func() bool { soldOut, _ := mayHold(edge, "MARK", "x"); return soldOut })

	if s, _ := bucketState(t, nc2, names, code); !s.SoldOut || !s.Holders.MayHold([]byte("N")) {
		t.Errorf("bucket: the stale sell-out (holders {L}) overwrote the newest (holders {N})")
	}
	if soldOut, fwd := mayHold(edge, code, "N"); !soldOut || !fwd {
		t.Errorf("listening edge: sold out %v, granted N forwarded %v; want true, true", soldOut, fwd)
	}
	_, later := startEdge(t, names)
	if soldOut, fwd := mayHold(later, code, "N"); !soldOut || !fwd {
		t.Errorf("edge started afterwards: sold out %v, granted N forwarded %v; want true, true", soldOut, fwd)
	}
	checkR1(t, g, code, v.TotalLimit)
}

// checkR1 fails the test unless remaining + held orders = total_limit (R1).
func checkR1(t *testing.T, g *gate.Gate, code string, total int) {
	t.Helper()
	ctx := context.Background()
	remaining, loaded, err := g.Remaining(ctx, code)
	if err != nil || !loaded {
		t.Fatalf("R1 %s: remaining %d loaded %v: %v", code, remaining, loaded, err)
	}
	orders, err := g.Orders(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	if remaining+int64(len(orders)) != int64(total) {
		t.Errorf("R1 %s: remaining %d + orders %d != total_limit %d", code, remaining, len(orders), total)
	}
}

// bucketState reads code's state in the bucket; false when the bucket or the key is missing.
func bucketState(t *testing.T, nc *nats.Conn, names events.Names, code string) (events.VoucherState, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, names.StateBucket())
	if err != nil {
		return events.VoucherState{}, false
	}
	e, err := kv.Get(ctx, code)
	if err != nil {
		return events.VoucherState{}, false
	}
	s, err := events.DecodeVoucherState(e.Value())
	if err != nil {
		t.Fatalf("bucket %s key %s: %v", names.StateBucket(), code, err)
	}
	return s, true
}

// deleteBucket removes the test's bucket: the shared server keeps buckets.
func deleteBucket(nc *nats.Conn, names events.Names) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if js, err := jetstream.New(nc); err == nil {
		_ = js.DeleteKeyValue(ctx, names.StateBucket())
	}
}

// putRaw writes s into the bucket as an older backend would: a plain put.
func putRaw(t *testing.T, nc *nats.Conn, names events.Names, s events.VoucherState) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, names.StateBucket())
	if err != nil {
		t.Fatal(err)
	}
	payload, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, s.Code, payload); err != nil {
		t.Fatal(err)
	}
}
