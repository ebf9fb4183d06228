package voucher_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/backend/voucher"
)

// A crowd that finds the backend's copy of its voucher stale (here: a backend just started)
// reads the voucher once, not once a request: every read would take a pooled connection as the
// sale opens. Each request is still answered.
func TestACrowdReadsAStaleVoucherOnce(t *testing.T) {
	f := newFakeEnv(voucher.Config{})
	f.create(t, "F", 1000, 1, true)
	f.warm(t, "F")
	var reads atomic.Int32
	release := make(chan struct{})
	f.store.hook = func(op string, _ []string) {
		if op == "Voucher" {
			reads.Add(1)
			<-release
		}
	}
	started := voucher.NewService(f.store, f.gate, f.note, f.cfg)
	var answers []<-chan outcome
	for i := range 100 {
		answers = append(answers, reserveAsync(started, "F", fmt.Sprintf("c%d", i), fmt.Sprintf("o%d", i)))
	}
	time.Sleep(50 * time.Millisecond) // the crowd finds no copy while the first read is held
	close(release)
	for i, a := range answers {
		if got := <-a; got.err != nil {
			t.Errorf("reservation %d: %v", i, got.err)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("the crowd read the voucher %d times; want once", n)
	}
	f.check(t, "F")
}
