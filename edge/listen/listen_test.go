package listen

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"vouchergate/edge/soldout"
	"vouchergate/shared/events"
	"vouchergate/testkit"
)

// backendSide writes voucher states as the backend's notifier does.
type backendSide struct {
	t     *testing.T
	names events.Names
	js    jetstream.JetStream
}

func newBackendSide(t *testing.T, url string, names events.Names) *backendSide {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the shared server keeps buckets: remove the test's
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteKeyValue(ctx, names.StateBucket())
	})
	return &backendSide{t: t, names: names, js: js}
}

func (b *backendSide) put(s events.VoucherState) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The backend's own call: it must work whether or not an edge created the bucket first.
	kv, err := b.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b.names.StateBucket(), History: 1})
	if err != nil {
		b.t.Fatalf("backend side: bucket: %v", err)
	}
	payload, err := s.Encode()
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := kv.Put(ctx, s.Code, payload); err != nil {
		b.t.Fatalf("backend side: put: %v", err)
	}
}

func (b *backendSide) putRaw(key string, payload []byte) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := b.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b.names.StateBucket(), History: 1})
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := kv.Put(ctx, key, payload); err != nil {
		b.t.Fatal(err)
	}
}

func soldOut(code string, holders ...string) events.VoucherState {
	return events.VoucherState{Code: code, SoldOut: true, At: time.Now().UTC(), Holders: events.NewHolderFilter(holders)}
}

func start(t *testing.T, url string, names events.Names) (*Listener, *soldout.Cache) {
	t.Helper()
	cache := soldout.New(soldout.Options{TTL: time.Minute})
	l, err := Start(Options{URL: url, Names: names, RetryEvery: 100 * time.Millisecond}, cache, testkit.QuietLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l, cache
}

func waitSynced(t *testing.T, l *Listener) {
	t.Helper()
	select {
	case <-l.Synced():
	case <-time.After(testkit.WaitBound):
		t.Fatal("listener never read the bucket")
	}
}

func soldOutIn(c *soldout.Cache, code string) bool {
	e, _ := c.Lookup([]byte(code), time.Now())
	return e != nil
}

func TestLearnsSellOutAndBackInStock(t *testing.T) {
	names := events.Names{Prefix: testkit.NATSPrefix()}
	l, cache := start(t, testkit.NATSURL, names) // creates the bucket: no backend yet
	waitSynced(t, l)
	b := newBackendSide(t, testkit.NATSURL, names)

	b.put(soldOut("FLASH", "o-1"))
	testkit.Eventually(t, "sell-out learned", func() bool { return soldOutIn(cache, "FLASH") })
	if e, _ := cache.Lookup([]byte("FLASH"), time.Now()); !e.MayHold([]byte("o-1")) {
		t.Fatal("holders lost on the way")
	}
	b.put(events.VoucherState{Code: "FLASH", At: time.Now().UTC()})
	testkit.Eventually(t, "back in stock learned", func() bool { return !soldOutIn(cache, "FLASH") })
}

func TestStartedAfterTheSellOutKnowsItOnceSynced(t *testing.T) {
	names := events.Names{Prefix: testkit.NATSPrefix()}
	b := newBackendSide(t, testkit.NATSURL, names)
	b.put(soldOut("EARLY", "o-1"))
	b.put(soldOut("BACK", "o-2"))
	b.put(events.VoucherState{Code: "BACK", At: time.Now().UTC()})

	l, cache := start(t, testkit.NATSURL, names)
	waitSynced(t, l)
	if !soldOutIn(cache, "EARLY") {
		t.Fatal("a voucher sold out before start is not known once synced")
	}
	if soldOutIn(cache, "BACK") {
		t.Fatal("a voucher back in stock before start is answered as sold out")
	}
}

func TestIgnoresStatesItCannotUse(t *testing.T) {
	names := events.Names{Prefix: testkit.NATSPrefix()}
	b := newBackendSide(t, testkit.NATSURL, names)
	b.putRaw("BROKEN", []byte(`{"code":"BROKEN","soldOut":true}`)) // no holders
	b.putRaw("GARBAGE", []byte(`not json`))
	b.putRaw("OTHER", mustEncode(t, soldOut("ELSE", "o-1"))) // under another key
	b.put(soldOut("GOOD", "o-1"))

	l, cache := start(t, testkit.NATSURL, names)
	waitSynced(t, l)
	for _, code := range []string{"BROKEN", "GARBAGE", "OTHER", "ELSE"} {
		if soldOutIn(cache, code) {
			t.Errorf("%s answered as sold out from an unusable state", code)
		}
	}
	if !soldOutIn(cache, "GOOD") {
		t.Error("a good state beside bad ones was not applied")
	}
}

func mustEncode(t *testing.T, s events.VoucherState) []byte {
	b, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestResyncsAfterNATSReturns(t *testing.T) {
	srv := testkit.StartNATS(t)
	names := events.Names{Prefix: testkit.NATSPrefix()}
	b := newBackendSide(t, srv.URL(), names)
	b.put(soldOut("FLASH", "o-1"))
	l, cache := start(t, srv.URL(), names)
	waitSynced(t, l)
	if !soldOutIn(cache, "FLASH") {
		t.Fatal("sell-out not learned")
	}

	srv.Kill()
	testkit.Eventually(t, "listener sees NATS down", func() bool { return !l.Connected() })
	before := l.Syncs()
	srv.Start()
	testkit.Eventually(t, "listener reconnected and read the bucket again", func() bool { return l.Syncs() > before })
	if !soldOutIn(cache, "FLASH") {
		t.Fatal("sold-out entry lost over the reconnect")
	}
	b.put(events.VoucherState{Code: "FLASH", At: time.Now().UTC()})
	testkit.Eventually(t, "back in stock learned after the reconnect", func() bool { return !soldOutIn(cache, "FLASH") })
}

func TestStartsWithNATSDownAndSyncsWhenItComes(t *testing.T) {
	srv := testkit.StartNATS(t)
	names := events.Names{Prefix: testkit.NATSPrefix()}
	b := newBackendSide(t, srv.URL(), names)
	b.put(soldOut("FLASH", "o-1"))
	srv.Stop()

	l, cache := start(t, srv.URL(), names)
	if l.Connected() {
		t.Fatal("connected to a stopped server")
	}
	srv.Start()
	waitSynced(t, l)
	if !soldOutIn(cache, "FLASH") {
		t.Fatal("sell-out not learned once NATS came")
	}
}

func versioned(s events.VoucherState, v uint64) events.VoucherState {
	s.Version = v
	return s
}

// The bucket's writers compare versions, but a backend from before versions puts blindly: a
// state older than the edge's is ignored, an unordered one is applied as it comes.
func TestIgnoresAStateOlderThanItsOwn(t *testing.T) {
	names := events.Names{Prefix: testkit.NATSPrefix()}
	l, cache := start(t, testkit.NATSURL, names)
	waitSynced(t, l)
	b := newBackendSide(t, testkit.NATSURL, names)
	marker := 0
	settle := func() { // every state put before the marker has been handled once the marker is applied
		t.Helper()
		marker++
		code := fmt.Sprintf("MARK%d", marker)
		b.put(soldOut(code))
		testkit.Eventually(t, "marker applied", func() bool { return soldOutIn(cache, code) })
	}

	b.put(versioned(soldOut("FLASH", "N"), 12))
	b.put(versioned(soldOut("FLASH", "L"), 10)) // stale: read before N took the use
	settle()
	if e, _ := cache.Lookup([]byte("FLASH"), time.Now()); e == nil || !e.MayHold([]byte("N")) {
		t.Fatal("a stale sell-out replaced the newer one: the granted N would be answered 409")
	}
	if l.Stale() != 1 {
		t.Errorf("Stale() = %d; want 1", l.Stale())
	}

	b.put(versioned(events.VoucherState{Code: "FLASH", At: time.Now().UTC()}, 13))
	b.put(versioned(soldOut("FLASH", "L"), 10))
	settle()
	if soldOutIn(cache, "FLASH") {
		t.Fatal("a stale sell-out came back after a newer back in stock")
	}

	b.put(soldOut("FLASH", "O")) // no version: an older backend's, taken as it comes
	settle()
	if e, _ := cache.Lookup([]byte("FLASH"), time.Now()); e == nil || !e.MayHold([]byte("O")) {
		t.Fatal("an unversioned state was not applied")
	}
	if cache.StateVersion("FLASH") != 13 {
		t.Errorf("StateVersion = %d; want 13 kept", cache.StateVersion("FLASH"))
	}
}
