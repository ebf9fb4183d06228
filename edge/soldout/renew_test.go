package soldout

import (
	"testing"
	"time"

	"vouchergate/shared/events"
)

func TestRenewKeepsAnEntryPastItsTTLUntilKeepAfterTheLastConfirmation(t *testing.T) {
	clk := newClock()
	c := New(Options{TTL: 5 * time.Second, Keep: 30 * time.Second, Now: clk.Now})
	_ = c.Apply(soldOut("FLASH", "o-1"))
	for range 12 { // a minute of confirmations every 5 s
		clk.Advance(5*time.Second - time.Millisecond)
		if !c.Renew("FLASH", clk.Now()) {
			t.Fatalf("a live entry was not renewed at %v", clk.Now())
		}
	}
	clk.Advance(30*time.Second - time.Millisecond)
	if e, _ := c.Lookup([]byte("FLASH"), clk.Now()); e == nil {
		t.Fatal("entry gone before Keep had passed since the last confirmation")
	}
	clk.Advance(time.Millisecond)
	if e, _ := c.Lookup([]byte("FLASH"), clk.Now()); e != nil {
		t.Fatal("entry answered Keep after the last confirmation")
	}
	if c.Renew("FLASH", clk.Now()) {
		t.Fatal("Renew brought back an expired entry")
	}
	if e, _ := c.Lookup([]byte("FLASH"), clk.Now()); e != nil {
		t.Fatal("an expired entry answers after Renew")
	}
}

func TestRenewNeverShortensAndTouchesNoState(t *testing.T) {
	clk := newClock()
	c := New(Options{TTL: 5 * time.Second, Keep: 30 * time.Second, Now: clk.Now})
	if c.Renew("NONE", clk.Now()) {
		t.Fatal("Renew of an unknown voucher reported an entry")
	}
	_ = c.Apply(soldOut("FLASH", "o-1"))
	version := c.Version("FLASH")
	c.Renew("FLASH", clk.Now())
	if c.Version("FLASH") != version {
		t.Fatal("Renew counted as a write: a read in flight would be thrown away")
	}
	c.Renew("FLASH", clk.Now().Add(-20*time.Second)) // an older confirmation, late
	// A live read of the same state (Apply) does not cut the renewed life back to TTL either.
	_ = c.Apply(soldOut("FLASH", "o-1"))
	clk.Advance(29 * time.Second)
	if e, _ := c.Lookup([]byte("FLASH"), clk.Now()); e == nil {
		t.Fatal("an older confirmation, or a live read of the state, shortened the renewed entry")
	}
	// Back in stock removes the entry; a renewal then finds nothing.
	_ = c.Apply(events.VoucherState{Code: "FLASH"})
	if c.Renew("FLASH", clk.Now()) {
		t.Fatal("Renew kept an entry a back-in-stock state removed")
	}
}
