package soldout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/shared/events"
	"vouchergate/testkit"
)

// states is a Source answering from a map, counting reads and the states it answered; gate,
// when set, holds each read.
type states struct {
	mu       sync.Mutex
	m        map[string]events.VoucherState
	reads    atomic.Int32
	answered atomic.Int32
	gate     chan struct{}
}

func (s *states) VoucherState(ctx context.Context, code string) (events.VoucherState, error) {
	s.reads.Add(1)
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return events.VoucherState{}, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[code]
	if !ok {
		return events.VoucherState{}, errors.New("no such voucher")
	}
	s.answered.Add(1)
	return st, nil
}

// idle reports whether r has no read of code in flight: a read that started has applied
// its state (or failed) once this holds.
func idle(r *Refresher, code string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.busy[code]
}

func learned(c *Cache, code string) bool {
	e, _ := c.Lookup([]byte(code), time.Now())
	return e != nil
}

func TestRefresherLearnsFromTheSource(t *testing.T) {
	c := New(Options{TTL: time.Minute})
	src := &states{m: map[string]events.VoucherState{"FLASH": soldOut("FLASH", "o-1"), "OTHER": soldOut("OTHER", "o-2")}}
	r := NewRefresher(c, src, time.Hour, time.Second, testkit.QuietLog)
	defer r.Close()

	for range 50 {
		r.Ask("FLASH")
	}
	// Asks are taken in order by one goroutine: once OTHER, asked last, is read, every ask of
	// FLASH has been decided.
	r.Ask("OTHER")
	testkit.Eventually(t, "both entries learned", func() bool { return learned(c, "FLASH") && learned(c, "OTHER") })
	if n := src.reads.Load(); n != 2 {
		t.Fatalf("50 asks of FLASH within the interval and one of OTHER made %d reads; want 2", n)
	}
	if e, _ := c.Lookup([]byte("FLASH"), time.Now()); !e.MayHold([]byte("o-1")) {
		t.Fatal("learned entry lost its holders")
	}
}

func TestRefresherRemovesAVoucherBackInStock(t *testing.T) {
	c := New(Options{TTL: time.Minute})
	_ = c.Apply(soldOut("FLASH", "o-1"))
	src := &states{m: map[string]events.VoucherState{"FLASH": {Code: "FLASH"}}}
	r := NewRefresher(c, src, time.Millisecond, time.Second, testkit.QuietLog)
	defer r.Close()
	r.Ask("FLASH")
	testkit.Eventually(t, "entry removed", func() bool { return !learned(c, "FLASH") })
}

func TestRefresherDropsAReadOvertakenByAnEvent(t *testing.T) {
	c := New(Options{TTL: time.Minute})
	src := &states{m: map[string]events.VoucherState{"FLASH": soldOut("FLASH", "o-1")}, gate: make(chan struct{})}
	r := NewRefresher(c, src, time.Millisecond, time.Hour, testkit.QuietLog) // the held read cannot time out
	defer r.Close()
	r.Ask("FLASH")
	testkit.Eventually(t, "read started", func() bool { return src.reads.Load() == 1 })
	if err := c.Apply(events.VoucherState{Code: "FLASH"}); err != nil { // back in stock, meanwhile
		t.Fatal(err)
	}
	close(src.gate)
	testkit.Eventually(t, "the held read finished", func() bool { return idle(r, "FLASH") })
	if n := src.answered.Load(); n != 1 {
		t.Fatalf("the source answered %d reads; want the held one answered", n)
	}
	if learned(c, "FLASH") {
		t.Fatal("a read that started before the back-in-stock event marked the voucher sold out")
	}
}

func TestRefresherCloseCancelsReads(t *testing.T) {
	c := New(Options{TTL: time.Minute})
	src := &states{m: map[string]events.VoucherState{}, gate: make(chan struct{})}
	r := NewRefresher(c, src, time.Millisecond, time.Hour, testkit.QuietLog)
	r.Ask("FLASH")
	testkit.Eventually(t, "read started", func() bool { return src.reads.Load() == 1 })
	done := make(chan struct{})
	go func() { r.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(testkit.WaitBound):
		t.Fatal("Close waited for a read that could not finish")
	}
}

func TestRefresherKeepsAnAskThatCameTooSoon(t *testing.T) {
	c := New(Options{TTL: time.Minute})
	src := &states{m: map[string]events.VoucherState{"FLASH": soldOut("FLASH", "o-1")}}
	// The interval is measured on a clock that stands still until the test moves it, so the
	// second ask is certainly too soon; the planned ask comes back every 20ms of real time.
	clock := testkit.NewManualClock(time.Now())
	r := newRefresher(c, src, 20*time.Millisecond, time.Second, testkit.QuietLog, clock.Now)
	defer r.Close()
	r.Ask("FLASH")
	testkit.Eventually(t, "sold out learned", func() bool { return learned(c, "FLASH") && idle(r, "FLASH") })
	src.mu.Lock()
	src.m["FLASH"] = events.VoucherState{Code: "FLASH"} // a release, right after
	src.mu.Unlock()
	r.Ask("FLASH") // within the interval: must not be lost
	testkit.Eventually(t, "the ask planned for later", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.later["FLASH"]
	})
	if n := src.reads.Load(); n != 1 {
		t.Fatalf("reads = %d within the interval; want 1", n)
	}
	clock.Advance(20 * time.Millisecond)
	testkit.Eventually(t, "back in stock learned", func() bool { return !learned(c, "FLASH") })
	if n := src.reads.Load(); n != 2 {
		t.Fatalf("reads = %d; want 2", n)
	}
}

// With the backends down every busy sold-out voucher's read fails: the warning is written once a
// second, with how many were left out, not once per voucher and read. (Before: a line each.)
func TestRefresherWarnsOnceASecondWhenReadsFail(t *testing.T) {
	log, logged := testkit.CaptureLog()
	src := &states{m: map[string]events.VoucherState{}} // every read fails
	clock := testkit.NewManualClock(time.Now())
	r := newRefresher(New(Options{TTL: time.Minute}), src, time.Hour, time.Second, log, clock.Now)
	t.Cleanup(r.Close)
	read := func(code string) {
		t.Helper()
		before := src.reads.Load()
		r.Ask(code)
		testkit.Eventually(t, "the read of "+code, func() bool { return src.reads.Load() > before && idle(r, code) })
	}
	for i := range 20 {
		read(fmt.Sprint("FLASH", i))
	}
	if n := strings.Count(logged(), "read voucher state"); n != 1 {
		t.Fatalf("%d warnings for 20 failed reads within a second; want 1:\n%s", n, logged())
	}
	clock.Advance(time.Second)
	read("LATER")
	if lines := strings.Split(strings.TrimSpace(logged()), "\n"); len(lines) != 2 || !strings.Contains(lines[1], "dropped=19") {
		t.Fatalf("a second later, the next failed read: %q; want a second warning saying 19 were left out", lines)
	}
}
