package soldout

import (
	"errors"
	"testing"
	"time"

	"vouchergate/shared/events"
)

func versioned(s events.VoucherState, v uint64) events.VoucherState {
	s.Version = v
	return s
}

func backInStock(code string) events.VoucherState {
	return events.VoucherState{Code: code, At: time.Now()}
}

// What the cache makes of a state, by its version against the highest one applied for the code.
func TestApplyKeepsTheNewestVersion(t *testing.T) {
	type step struct {
		state   events.VoucherState
		stale   bool   // Apply refuses it with ErrStale
		soldOut bool   // then: the voucher answered sold out
		holder  string // ...with this order forwarded ("" for none)
		held    uint64 // ...and this highest version kept
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"newer replaces older", []step{
			{state: versioned(soldOut("V", "L"), 10), soldOut: true, holder: "L", held: 10},
			{state: versioned(backInStock("V"), 11), held: 11},
			{state: versioned(soldOut("V", "N"), 12), soldOut: true, holder: "N", held: 12},
		}},
		{"older sell-out after a newer sell-out", []step{
			{state: versioned(soldOut("V", "N"), 12), soldOut: true, holder: "N", held: 12},
			{state: versioned(soldOut("V", "L"), 10), stale: true, soldOut: true, holder: "N", held: 12},
		}},
		{"older sell-out after a newer back in stock: the entry is gone, its version is not", []step{
			{state: versioned(soldOut("V", "L"), 10), soldOut: true, holder: "L", held: 10},
			{state: versioned(backInStock("V"), 11), held: 11},
			{state: versioned(soldOut("V", "L"), 10), stale: true, held: 11},
		}},
		{"older back in stock after a newer sell-out", []step{
			{state: versioned(soldOut("V", "N"), 12), soldOut: true, holder: "N", held: 12},
			{state: versioned(backInStock("V"), 11), stale: true, soldOut: true, holder: "N", held: 12},
		}},
		{"the same version again renews the entry", []step{
			{state: versioned(soldOut("V", "N"), 12), soldOut: true, holder: "N", held: 12},
			{state: versioned(soldOut("V", "N"), 12), soldOut: true, holder: "N", held: 12},
		}},
		{"an unordered state (older backend) applies in arrival order and keeps the highest version", []step{
			{state: versioned(soldOut("V", "N"), 12), soldOut: true, holder: "N", held: 12},
			{state: backInStock("V"), held: 12},
			{state: soldOut("V", "L"), soldOut: true, holder: "L", held: 12},
			{state: versioned(soldOut("V", "L"), 10), stale: true, soldOut: true, holder: "L", held: 12},
			{state: versioned(backInStock("V"), 13), held: 13},
		}},
		{"versions are per voucher", []step{
			{state: versioned(soldOut("V", "N"), 12), soldOut: true, holder: "N", held: 12},
			{state: versioned(soldOut("W", "M"), 3), held: 12, soldOut: true, holder: "N"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Options{TTL: time.Minute})
			defer c.Close()
			for i, s := range tc.steps {
				err := c.Apply(s.state)
				if s.stale != errors.Is(err, ErrStale) || (!s.stale && err != nil) {
					t.Fatalf("step %d: Apply = %v; want stale %v", i, err, s.stale)
				}
				e, _ := c.Lookup([]byte("V"), time.Now())
				if (e != nil) != s.soldOut {
					t.Fatalf("step %d: sold out %v; want %v", i, e != nil, s.soldOut)
				}
				if e != nil && !e.MayHold([]byte(s.holder)) {
					t.Fatalf("step %d: %s not forwarded: the entry is not the newest state's", i, s.holder)
				}
				if got := c.StateVersion("V"); got != s.held {
					t.Fatalf("step %d: StateVersion = %d; want %d", i, got, s.held)
				}
			}
		})
	}
}

func TestSameVersionRenewsTheEntry(t *testing.T) {
	clk := newClock()
	c := New(Options{TTL: 5 * time.Second, Now: clk.Now})
	defer c.Close()
	_ = c.Apply(versioned(soldOut("V", "N"), 12))
	clk.Advance(4 * time.Second)
	if err := c.Apply(versioned(soldOut("V", "N"), 12)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(4 * time.Second)
	if e, _ := c.Lookup([]byte("V"), clk.Now()); e == nil {
		t.Fatal("an entry applied again at its version expired at the first one's TTL")
	}
}

// A live read from a backend that answers an older state than the cache holds (that backend
// read Redis before the newest event was written) is dropped.
func TestApplyIfDropsAnOlderVersion(t *testing.T) {
	c := New(Options{TTL: time.Minute})
	defer c.Close()
	_ = c.Apply(versioned(soldOut("V", "N"), 12))
	applied, err := c.ApplyIf(versioned(soldOut("V", "L"), 10), c.Version("V"))
	if err != nil || applied {
		t.Fatalf("ApplyIf of an older version = %v, %v; want false, nil", applied, err)
	}
	if e, _ := c.Lookup([]byte("V"), time.Now()); e == nil || !e.MayHold([]byte("N")) {
		t.Fatal("an older live read replaced the newest state")
	}
	applied, err = c.ApplyIf(versioned(backInStock("V"), 13), c.Version("V"))
	if err != nil || !applied {
		t.Fatalf("ApplyIf of a newer version = %v, %v; want true, nil", applied, err)
	}
}
