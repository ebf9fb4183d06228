package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/events"
	"vouchergate/testkit"
)

// The backend tells the edges over NATS when a flash voucher sells out (with every holder) and
// when a release brings it back, as an event and as the bucket's current value.
func TestSoldOutAndBackInStockEvents(t *testing.T) {
	cfg := backendtest.Config(t)
	// Refusals republish a sold-out state at most once per SoldOutEvery: an hour, so that none of
	// the late traffic below may, however long it takes. A release is never held back.
	cfg.SoldOutEvery = time.Hour
	b := backendtest.Start(t, cfg)
	names := events.Names{Prefix: b.Config.NATSPrefix}
	nc, err := nats.Connect(testkit.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	states := make(chan events.VoucherState, 64)
	sub, err := nc.Subscribe(names.AllVoucherStates(), func(m *nats.Msg) {
		s, err := events.DecodeVoucherState(m.Data)
		if err != nil {
			t.Errorf("event %s: %v", m.Data, err)
			return
		}
		states <- s
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	b.CreateVoucher(t, backendtest.Voucher{Code: "EVT", Discount: 1, TotalLimit: 3, FlashSale: true})
	holders := []string{"h1", "h2", "h3"}
	for i, o := range holders {
		if a := reserve(t, b, "EVT", "c"+itoa(i), o, 10); a.status != 201 {
			t.Fatalf("reserve %s: %+v", o, a)
		}
	}
	for i := range 20 { // late traffic: refused, and no event of its own
		reserve(t, b, "EVT", "late"+itoa(i), "late"+itoa(i), 10)
	}
	soldOut := waitState(t, states, true)
	for _, o := range holders {
		if !soldOut.Holders.MayHold([]byte(o)) {
			t.Errorf("sold-out event does not hold %s", o)
		}
	}
	if soldOut.Holders.MayHold([]byte("late0")) && soldOut.Holders.MayHold([]byte("late1")) {
		t.Errorf("sold-out event holds refused orders")
	}
	backendtest.WaitBucketState(t, nc, names, "EVT", true)
	var live events.VoucherState
	if status, body := b.Do(t, "GET", "/vouchers/EVT/state", nil); status != 200 || json.Unmarshal(body, &live) != nil || !live.SoldOut || !live.Holders.MayHold([]byte("h2")) {
		t.Errorf("GET state: %d %s", status, body)
	}

	if st, _ := b.Do(t, "DELETE", "/vouchers/EVT/reservations/h2", nil); st != 200 {
		t.Fatalf("release: %d", st)
	}
	waitState(t, states, false)
	backendtest.WaitBucketState(t, nc, names, "EVT", false)
	extra := 0
	for len(states) > 0 {
		if s := <-states; s.SoldOut {
			extra++
		}
	}
	if extra > 0 {
		t.Errorf("%d more sold-out events for 20 refusals inside the throttle; want none", extra)
	}
	b.CheckInvariants(t, "EVT", []string{"h1", "h3"})
}

func waitState(t *testing.T, states <-chan events.VoucherState, soldOut bool) events.VoucherState {
	t.Helper()
	timeout := time.After(testkit.WaitBound) // a hang guard, not a time the event must beat
	for {
		select {
		case s := <-states:
			if s.SoldOut == soldOut {
				return s
			}
		case <-timeout:
			t.Fatalf("no event with soldOut=%v", soldOut)
		}
	}
}
