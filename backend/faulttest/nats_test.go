package faulttest

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
	"vouchergate/shared/events"
	"vouchergate/testkit"
)

// NATS is stopped mid-sale and started again. NATS is not on the reservation path: the sale
// goes on and sells out while NATS is away, every client with its answer. Once NATS is back
// the sold-out state, with every holder, reaches the bucket and the subject; a release brings
// the voucher back in the bucket too. Then the usual end: Redis equals the database after
// reconciliation and the voucher sells exactly its remaining uses.
func TestNATSStoppedMidSale(t *testing.T) {
	ns := testkit.StartNATS(t)
	b, clock, c := startBackend(t, func(cfg *config.Backend) { cfg.NATSURL = ns.URL() })
	names := events.Names{Prefix: b.Config.NATSPrefix}
	const code, total = "NATS-DOWN", 100
	createFlash(t, b, code, total, 2)

	attempts := storm("", 500, 4)
	s := startSale(attempts, 48, func(a attempt) outcome { return c.reserveOrder(code, a, patient) })
	s.waitGranted(t, total/3)
	s.running(t, "stop nats")
	ns.Stop()

	outcomes := s.wait(t)
	t.Logf("%s", tally(outcomes))
	retried := 0
	for _, o := range outcomes {
		if !o.definitive() {
			t.Errorf("order %s: %d %s with NATS away; NATS is not on the reservation path", o.order, o.status, o.code)
		}
		retried += o.tries - 1
	}
	t.Logf("requests retried after a 503: %d", retried)
	granted := checkAnswers(t, b.App.Pool, code, outcomes)
	holders := active(rows(t, b.App.Pool, code))
	if len(holders) != total {
		t.Fatalf("%d uses sold while NATS was away; the sale should have sold all %d", len(holders), total)
	}
	b.CheckInvariants(t, code, granted) // nothing broke in Redis or the database

	ns.Start()
	nc, err := nats.Connect(ns.URL(), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("connect to NATS: %v", err)
	}
	defer nc.Close()
	states := make(chan events.VoucherState, 64)
	sub, err := nc.Subscribe(names.VoucherState(code), func(m *nats.Msg) {
		if s, err := events.DecodeVoucherState(m.Data); err == nil {
			select {
			case states <- s:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	st := backendtest.WaitBucketState(t, nc, names, code, true)
	for id := range holders {
		if !st.Holders.MayHold([]byte(id)) {
			t.Errorf("the sold-out state in the bucket does not hold order %s", id)
		}
	}
	// On the subject: a late refusal publishes the sold-out state again (at most every 250ms).
	testkit.Eventually(t, "a sold-out event with the holders on "+names.VoucherState(code)+" after NATS came back", func() bool {
		if o := c.reserveOrder(code, attempt{customer: "late", order: "late-1"}, patient); o.status != 409 {
			t.Errorf("late order while sold out: %d %s", o.status, o.code)
		}
		for {
			select {
			case e := <-states:
				if e.SoldOut && e.Holders != nil && e.Holders.MayHold([]byte(granted[0])) {
					return true
				}
			default:
				return false
			}
		}
	})

	// A release after NATS came back reaches the bucket: available again.
	if a, raw := c.send("DELETE", "/vouchers/"+code+"/reservations/"+granted[0], nil, 30*time.Second); a.status != 200 {
		t.Fatalf("release %s: %d %s", granted[0], a.status, raw)
	}
	backendtest.WaitBucketState(t, nc, names, code, false)

	finish(t, b, clock, c, code, granted[1:], customers(outcomes))
	backendtest.WaitBucketState(t, nc, names, code, true)
}
