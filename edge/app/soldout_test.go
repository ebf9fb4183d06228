package app_test

import (
	"fmt"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/events"
	"vouchergate/testkit"
)

// sellOut creates a flash voucher of total uses through the backend and takes all of them
// through e, returning the granted orderIds.
func sellOut(t *testing.T, b *backendtest.Backend, e *edge, code string, total int) []string {
	t.Helper()
	b.CreateVoucher(t, backendtest.Voucher{Code: code, Discount: 5000, TotalLimit: total, FlashSale: true})
	var granted []string
	for i := range total {
		order := fmt.Sprintf("%s-order-%d", code, i)
		a := e.reserve(t, code, fmt.Sprintf("cust-%d", i), order)
		if a.Status != 201 {
			t.Fatalf("reservation %d of %d: %d %s", i+1, total, a.Status, a.Body)
		}
		granted = append(granted, order)
	}
	return granted
}

func TestSellOutThroughTwoEdges(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.Start(t, cfg)
	front1, front2 := startFront(t, b.Addr), startFront(t, b.Addr)
	e1 := startEdge(t, edgeConfig(cfg.NATSURL, cfg.NATSPrefix, front1.Addr))
	e2 := startEdge(t, edgeConfig(cfg.NATSURL, cfg.NATSPrefix, front2.Addr))

	granted := sellOut(t, b, e1, "FLASH", 20)
	testkit.Eventually(t, "edge 1 knows the sell-out", func() bool { return e1.knows("FLASH") })
	testkit.Eventually(t, "edge 2 learns the sell-out over NATS", func() bool { return e2.knows("FLASH") })
	if n := front2.reserves.Load() + front2.others.Load(); n != 0 {
		t.Fatalf("edge 2 sent %d requests to the backend to learn; want 0", n)
	}

	before := front1.reserves.Load()
	counts := hammer(t, e1, "FLASH", 10000, 32)
	if counts[409] != 10000 {
		t.Fatalf("10,000 late reservations answered %v; want all 409", counts)
	}
	reached := front1.reserves.Load() - before
	t.Logf("late reservations that reached the backend: %d of 10000\n%s", reached, metrics(t, e1))
	// The holders are a Bloom filter with 0.1% false positives: about 10 in 10,000 new orders
	// are taken for holders and forwarded, and the backend refuses them.
	if reached > 50 {
		t.Fatalf("%d of 10,000 late reservations reached the backend; want almost none", reached)
	}

	for _, e := range []*edge{e1, e2} {
		for i, order := range granted {
			a := e.reserve(t, "FLASH", fmt.Sprintf("cust-%d", i), order)
			if a.Status != 201 || discountOf(t, a.Body) != 5000 {
				t.Fatalf("retry of granted %s through an edge: %d %s", order, a.Status, a.Body)
			}
		}
	}
	b.CheckInvariants(t, "FLASH", granted)

	if a := e1.do(t, "DELETE", "/vouchers/FLASH/reservations/"+granted[0], ""); a.Status != 200 {
		t.Fatalf("release through the edge: %d %s", a.Status, a.Body)
	}
	// Back in stock: both edges learn it over NATS, and the use given back is sold again.
	for i, e := range []*edge{e1, e2} {
		testkit.Eventually(t, fmt.Sprintf("edge %d learns the voucher is back in stock", i+1), func() bool { return !e.knows("FLASH") })
	}
	if a := e1.reserve(t, "FLASH", "after", "after-order"); a.Status != 201 {
		t.Fatalf("reservation after the release: %d %s", a.Status, a.Body)
	}
	b.CheckInvariants(t, "FLASH", append(granted[1:], "after-order"))
}

func TestEdgeStartedAfterTheSellOutKnowsItAtStart(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.Start(t, cfg)
	b.CreateVoucher(t, backendtest.Voucher{Code: "EARLY", Discount: 100, TotalLimit: 3, FlashSale: true})
	var granted []string
	for i := range 3 {
		order := fmt.Sprintf("early-%d", i)
		if status, body := b.Reserve(t, "EARLY", fmt.Sprintf("c-%d", i), order, 1000); status != 201 {
			t.Fatalf("reserve: %d %s", status, body)
		}
		granted = append(granted, order)
	}
	if status, _ := b.Reserve(t, "EARLY", "c-late", "late", 1000); status != 409 {
		t.Fatalf("the voucher did not sell out: %d", status)
	}
	backendtest.WaitBucketState(t, b.App.NATS, events.Names{Prefix: cfg.NATSPrefix}, "EARLY", true)

	front := startFront(t, b.Addr)
	e := startEdge(t, edgeConfig(cfg.NATSURL, cfg.NATSPrefix, front.Addr))
	if !e.knows("EARLY") {
		t.Fatal("edge started after the sell-out does not know it once started")
	}
	if a := e.reserve(t, "EARLY", "c-new", "new-order"); a.Status != 409 {
		t.Fatalf("new order: %d %s", a.Status, a.Body)
	}
	if n := front.reserves.Load(); n != 0 {
		t.Fatalf("%d reservations reached the backend from an edge that knew at start", n)
	}
	if a := e.reserve(t, "EARLY", "c-0", granted[0]); a.Status != 201 {
		t.Fatalf("granted order's retry: %d %s", a.Status, a.Body)
	}
}
