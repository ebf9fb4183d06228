package listen

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/edge/soldout"
	"vouchergate/shared/events"
	"vouchergate/testkit"
)

// An entry the bucket says is sold out outlives its TTL while the watch is confirmed, and
// lives Keep past the last confirmation once nothing confirms it (here: the listener closed).
// One the bucket no longer says is sold out is not renewed.
func TestConfirmedWatchKeepsSoldOutEntriesPastTheirTTL(t *testing.T) {
	names := events.Names{Prefix: testkit.NATSPrefix()}
	b := newBackendSide(t, testkit.NATSURL, names)
	b.put(soldOut("KEPT", "o-1"))
	b.put(soldOut("GONE", "o-2"))
	const ttl, keep = 200 * time.Millisecond, 1500 * time.Millisecond
	cache := soldout.New(soldout.Options{TTL: ttl, Keep: keep})
	l, err := Start(Options{URL: testkit.NATSURL, Names: names, RetryEvery: 100 * time.Millisecond,
		CheckEvery: 100 * time.Millisecond}, cache, testkit.QuietLog)
	if err != nil {
		t.Fatal(err)
	}
	waitSynced(t, l)
	if l.ConfirmedAt().IsZero() {
		t.Fatal("the first complete read confirmed nothing")
	}
	b.put(events.VoucherState{Code: "GONE", At: time.Now().UTC()}) // back in stock
	time.Sleep(5 * ttl)
	if !soldOutIn(cache, "KEPT") {
		t.Fatal("a sold-out entry the bucket confirms expired at its TTL")
	}
	if soldOutIn(cache, "GONE") {
		t.Fatal("an entry the bucket says is back in stock is still answered")
	}

	l.Close()
	last := l.ConfirmedAt()
	testkit.Eventually(t, "the entry ends once nothing confirms it", func() bool { return !soldOutIn(cache, "KEPT") })
	if lived := time.Since(last); lived < keep-100*time.Millisecond || lived > keep+time.Second {
		t.Fatalf("the entry lived %v past the last confirmation; want about %v", lived, keep)
	}
}

// Confirmations from two goroutines (the watch's run and checkWatch) never move ConfirmedAt
// back: each sees its own confirmation stand until a later one replaces it, and it ends at the
// latest. (Before: each compared and then stored, so one could store its earlier time over the
// other's later one.)
func TestConfirmedAtNeverStepsBack(t *testing.T) {
	var confirmedAt atomic.Int64
	const each = 1000000
	var stepsBack atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range each {
				n := int64(2*i + g + 1)
				storeLater(&confirmedAt, n)
				if confirmedAt.Load() < n {
					stepsBack.Add(1)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if n := stepsBack.Load(); n > 0 {
		t.Errorf("ConfirmedAt stepped back below a confirmation just made %d times in %d", n, 2*each)
	}
	if got := confirmedAt.Load(); got != 2*each {
		t.Fatalf("ConfirmedAt ended at %d; want the latest, %d", got, 2*each)
	}
}
