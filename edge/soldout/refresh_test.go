package soldout

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/shared/events"
	"vouchergate/testkit"
)

// states is a Source answering from a map, counting reads; gate, when set, holds each read.
type states struct {
	mu    sync.Mutex
	m     map[string]events.VoucherState
	reads atomic.Int32
	gate  chan struct{}
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
	return st, nil
}

func TestRefresherLearnsFromTheSource(t *testing.T) {
	c := New(Options{TTL: time.Minute})
	src := &states{m: map[string]events.VoucherState{"FLASH": soldOut("FLASH", "o-1")}}
	r := NewRefresher(c, src, time.Hour, time.Second, testkit.QuietLog)
	defer r.Close()

	for range 50 {
		r.Ask("FLASH")
	}
	testkit.Eventually(t, "entry learned", func() bool { e, _ := c.Lookup([]byte("FLASH"), time.Now()); return e != nil })
	time.Sleep(50 * time.Millisecond)
	if n := src.reads.Load(); n != 1 {
		t.Fatalf("50 asks within the interval made %d reads; want 1", n)
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
	testkit.Eventually(t, "entry removed", func() bool { e, _ := c.Lookup([]byte("FLASH"), time.Now()); return e == nil })
}

func TestRefresherDropsAReadOvertakenByAnEvent(t *testing.T) {
	c := New(Options{TTL: time.Minute})
	src := &states{m: map[string]events.VoucherState{"FLASH": soldOut("FLASH", "o-1")}, gate: make(chan struct{})}
	r := NewRefresher(c, src, time.Millisecond, time.Second, testkit.QuietLog)
	defer r.Close()
	r.Ask("FLASH")
	testkit.Eventually(t, "read started", func() bool { return src.reads.Load() == 1 })
	if err := c.Apply(events.VoucherState{Code: "FLASH"}); err != nil { // back in stock, meanwhile
		t.Fatal(err)
	}
	close(src.gate)
	time.Sleep(100 * time.Millisecond)
	if e, _ := c.Lookup([]byte("FLASH"), time.Now()); e != nil {
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
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a read that could not finish")
	}
}

func TestRefresherKeepsAnAskThatCameTooSoon(t *testing.T) {
	c := New(Options{TTL: time.Minute})
	src := &states{m: map[string]events.VoucherState{"FLASH": soldOut("FLASH", "o-1")}}
	r := NewRefresher(c, src, 100*time.Millisecond, time.Second, testkit.QuietLog)
	defer r.Close()
	r.Ask("FLASH")
	testkit.Eventually(t, "sold out learned", func() bool { e, _ := c.Lookup([]byte("FLASH"), time.Now()); return e != nil })
	src.mu.Lock()
	src.m["FLASH"] = events.VoucherState{Code: "FLASH"} // a release, right after
	src.mu.Unlock()
	r.Ask("FLASH") // within the interval: must not be lost
	testkit.Eventually(t, "back in stock learned", func() bool { e, _ := c.Lookup([]byte("FLASH"), time.Now()); return e == nil })
	if n := src.reads.Load(); n != 2 {
		t.Fatalf("reads = %d; want 2", n)
	}
}
