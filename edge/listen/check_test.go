package listen

import (
	"testing"
	"time"

	"vouchergate/edge/soldout"
	"vouchergate/shared/events"
	"vouchergate/testkit"
)

// A watch that has not delivered what the bucket held at the last check is replaced: the
// listener reads the whole bucket again. (A consumer that vanished with the NATS node holding
// it leaves the watch silent; edge/app's TestANATSNodeKilledMidSale kills a real node. Here
// the silence is made by forgetting what the watch delivered.)
func TestWatchesAgainWhenTheWatchFallsBehind(t *testing.T) {
	names := events.Names{Prefix: testkit.NATSPrefix()}
	b := newBackendSide(t, testkit.NATSURL, names)
	b.put(soldOut("FIRST", "o-1"))
	cache := soldout.New(soldout.Options{TTL: time.Minute})
	l, err := Start(Options{URL: testkit.NATSURL, Names: names, RetryEvery: 100 * time.Millisecond,
		CheckEvery: 100 * time.Millisecond}, cache, testkit.QuietLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	waitSynced(t, l)
	syncs := l.Syncs()

	l.lastRev.Store(0) // as if FIRST had never arrived: the bucket is ahead of the watch
	testkit.Eventually(t, "a new read of the bucket", func() bool { return l.Syncs() > syncs })
	if got := l.lastRev.Load(); got == 0 {
		t.Fatal("the new watch did not record what it read")
	}
	b.put(soldOut("SECOND", "o-2"))
	testkit.Eventually(t, "a state written after the new watch learned", func() bool { return soldOutIn(cache, "SECOND") })

	// A watch that keeps up is left alone.
	syncs = l.Syncs()
	time.Sleep(500 * time.Millisecond) // five checks
	if l.Syncs() != syncs {
		t.Fatalf("the bucket was read again %d times while the watch kept up", l.Syncs()-syncs)
	}
}
