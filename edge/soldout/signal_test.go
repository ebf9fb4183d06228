package soldout

import (
	"testing"
	"time"

	"vouchergate/shared/events"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestSoldOutSignalsEachStoredSellOutOnly(t *testing.T) {
	c := New(Options{TTL: time.Minute})
	waiting := c.SoldOut()
	if err := c.Apply(events.VoucherState{Code: "FLASH", Version: 1}); err != nil {
		t.Fatal(err)
	}
	if closed(waiting) {
		t.Fatal("a state that is not sold out signalled a sell-out")
	}
	if err := c.Apply(soldOut("FLASH", "o-1")); err != nil {
		t.Fatal(err)
	}
	if !closed(waiting) {
		t.Fatal("a stored sell-out did not wake the waiter that took the signal before it")
	}
	next := c.SoldOut()
	if closed(next) {
		t.Fatal("the signal after a sell-out is already closed: waiters would spin")
	}
	if e, _ := c.Lookup([]byte("FLASH"), time.Now()); e == nil {
		t.Fatal("woken, a waiter finds no entry")
	}
}
