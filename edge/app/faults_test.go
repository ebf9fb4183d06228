package app_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
	"vouchergate/testkit"
)

func TestEdgeResyncsWhenNATSReturns(t *testing.T) {
	nats := testkit.StartNATS(t)
	cfg := backendtest.Config(t)
	cfg.NATSURL = nats.URL()
	b := backendtest.Start(t, cfg)
	front := startFront(t, b.Addr)
	ecfg := edgeConfig(nats.URL(), cfg.NATSPrefix, front.Addr)
	ecfg.SoldOutTTL, ecfg.SoldOutRefresh = 10*time.Minute, 0 // only NATS may clear the entry here
	e := startEdge(t, ecfg)

	granted := sellOut(t, b, e, "FLASH", 5)
	testkit.Eventually(t, "sell-out learned", func() bool { return e.knows("FLASH") })

	nats.Kill()
	testkit.Eventually(t, "edge sees NATS down", func() bool { return !e.App.Listener.Connected() })
	// Back in stock while NATS is away: no event can reach the edge.
	if status, body := b.Do(t, "DELETE", "/vouchers/FLASH/reservations/"+granted[0], nil); status != 200 {
		t.Fatalf("release: %d %s", status, body)
	}
	if !e.knows("FLASH") {
		t.Fatal("the entry went away with NATS down and no refresh: the test no longer tests the resync")
	}
	syncs := e.App.Listener.Syncs()
	nats.Start()
	testkit.Eventually(t, "edge read the sold-out set again", func() bool { return e.App.Listener.Syncs() > syncs })
	testkit.Eventually(t, "back in stock learned after NATS returned", func() bool { return !e.knows("FLASH") })
	// Nothing but NATS told it: the edge never read a state from the backend, and its entry
	// had minutes to live.
	if n := front.others.Load(); n != 0 {
		t.Fatalf("the edge sent %d requests other than reservations to the backend; want none (it must learn from NATS)", n)
	}
	if a := e.reserve(t, "FLASH", "after", "after-order"); a.Status != 201 {
		t.Fatalf("reservation after the resync: %d %s", a.Status, a.Body)
	}
}

// withNATSDown starts a backend whose NATS is down for the whole test (neither it nor an edge
// can use it) and a front counting what reaches the backend; it returns them with settings
// for an edge behind the front that does not wait for NATS at start.
func withNATSDown(t *testing.T) (*backendtest.Backend, *front, config.Edge) {
	t.Helper()
	nats := testkit.StartNATS(t)
	nats.Stop()
	cfg := backendtest.Config(t)
	cfg.NATSURL = nats.URL()
	b := backendtest.Start(t, cfg)
	front := startFront(t, b.Addr)
	ecfg := edgeConfig(nats.URL(), cfg.NATSPrefix, front.Addr)
	ecfg.SyncWait = 0
	return b, front, ecfg
}

// sellOutAndLearn sells a flash voucher of total uses out through e, then sends one new
// order, whose 409 passing through makes e read the holders from the backend. It returns the
// granted orders.
func sellOutAndLearn(t *testing.T, b *backendtest.Backend, e *edge, code string, total int) []string {
	t.Helper()
	granted := sellOut(t, b, e, code, total)
	if a := e.reserve(t, code, "late-0", "late-0"); a.Status != 409 {
		t.Fatalf("first late order: %d %s", a.Status, a.Body)
	}
	testkit.Eventually(t, "holders read from the backend after a passing 409", func() bool { return e.knows(code) })
	return granted
}

func TestWithNATSDownTheEdgeLearnsFromPassing409s(t *testing.T) {
	b, front, ecfg := withNATSDown(t)
	e := startEdge(t, ecfg)
	other := startEdge(t, ecfg)

	granted := sellOutAndLearn(t, b, e, "FLASH", 10)
	before := front.reserves.Load()
	counts := hammer(t, e, "FLASH", 2000, 16)
	if counts[409] != 2000 {
		t.Fatalf("late reservations answered %v; want all 409", counts)
	}
	if reached := front.reserves.Load() - before; reached > 20 {
		t.Fatalf("%d of 2,000 late reservations reached the backend with NATS down", reached)
	}
	for i, order := range granted {
		for _, ed := range []*edge{e, other} {
			if a := ed.reserve(t, "FLASH", fmt.Sprintf("cust-%d", i), order); a.Status != 201 {
				t.Fatalf("retry of granted %s: %d %s", order, a.Status, a.Body)
			}
		}
	}
}

// With NATS down for the whole test, a release reaches the edge only through its refresher: a
// lookup of an entry older than SoldOutRefresh asks for the voucher's state again, the state
// read from a backend says back in stock, and new orders are forwarded again, long before the
// entry's TTL would have ended it.
func TestWithNATSDownTheEdgeLearnsBackInStockByRefresh(t *testing.T) {
	b, front, ecfg := withNATSDown(t)
	ecfg.SoldOutTTL, ecfg.SoldOutRefresh = 10*time.Minute, time.Millisecond // only a refresh can end the entry here
	e := startEdge(t, ecfg)

	granted := sellOutAndLearn(t, b, e, "FLASH", 5)
	if status, body := b.Do(t, "DELETE", "/vouchers/FLASH/reservations/"+granted[0], nil); status != 200 {
		t.Fatalf("release: %d %s", status, body)
	}
	reads := front.others.Load()

	// New orders meet the entry and are answered 409 by the edge, until the refresh their
	// lookups asked for has read the voucher back in stock; then one is forwarded and granted.
	var order string
	tries := 0
	testkit.Eventually(t, "a new order granted through the edge after the release", func() bool {
		tries++
		try := fmt.Sprintf("new-order-%d", tries)
		switch a := e.reserve(t, "FLASH", fmt.Sprintf("new-%d", tries), try); a.Status {
		case 201:
			order = try
		case 409:
		default:
			t.Fatalf("new order %s after the release: %d %s", try, a.Status, a.Body)
		}
		return order != ""
	})
	if front.others.Load() == reads {
		t.Fatal("the edge forwarded a new order again without reading the voucher's state")
	}
	b.CheckInvariants(t, "FLASH", append(granted[1:], order))
}

func TestKilledBackend(t *testing.T) {
	cfg := backendtest.Config(t)
	admin := backendtest.Start(t, cfg) // for creating the voucher; not behind the edge
	b1, b2 := backendtest.StartProcess(t, cfg), backendtest.StartProcess(t, cfg)
	ecfg := edgeConfig(cfg.NATSURL, cfg.NATSPrefix, b1.Addr(), b2.Addr())
	ecfg.BackendTimeout = 2 * time.Second
	e := startEdge(t, ecfg)
	admin.CreateVoucher(t, backendtest.Voucher{Code: "NORMAL", Discount: 10, TotalLimit: 100000, PerUserLimit: 1000})
	testkit.Eventually(t, "both backends in service", func() bool { return e.App.Pool.Healthy() == 2 })

	// Reservations keep coming while backend 1 is killed. Each gets an answer (the client gives
	// up after 15 s): a 201 or the edge's JSON gateway error, never a hang or a leaked error.
	stop := make(chan struct{})
	results := make(chan error, 1)
	var answered atomic.Int64
	go func() {
		var failed error
		for i := 0; ; i++ {
			select {
			case <-stop:
				results <- failed
				return
			default:
			}
			a := e.reserve(t, "NORMAL", fmt.Sprintf("c-%d", i), fmt.Sprintf("during-%d", i))
			switch {
			case a.Status == 201:
			case (a.Status == 502 || a.Status == 503) && jsonGatewayError(a.Body):
			default:
				failed = fmt.Errorf("answer %d %s", a.Status, a.Body)
			}
			answered.Add(1)
		}
	}()
	testkit.Eventually(t, "reservations flowing before the kill", func() bool { return answered.Load() >= 20 })
	b1.Kill()
	testkit.Eventually(t, "killed backend out of service", func() bool { return e.App.Pool.Healthy() == 1 })
	out := answered.Load()
	testkit.Eventually(t, "reservations answered once the killed backend is out", func() bool { return answered.Load() >= out+20 })
	close(stop)
	if err := <-results; err != nil {
		t.Fatalf("while backend 1 was killed: %v", err)
	}
	t.Logf("after the kill:\n%s", metrics(t, e))
	for i := range 20 {
		if a := e.reserve(t, "NORMAL", "c", fmt.Sprintf("after-%d", i)); a.Status != 201 {
			t.Fatalf("the other backend must serve: %d %s", a.Status, a.Body)
		}
	}

	b1.Start()
	testkit.Eventually(t, "restarted backend back in service", func() bool { return e.App.Pool.Healthy() == 2 })

	// Every backend gone: a JSON 503, never a hang.
	b1.Kill()
	b2.Kill()
	testkit.Eventually(t, "both backends out", func() bool { return e.App.Pool.Healthy() == 0 })
	a := e.reserve(t, "NORMAL", "c", "none-left")
	if a.Status != 503 || !jsonGatewayError(a.Body) {
		t.Fatalf("with no backend: %d %s; want a JSON 503", a.Status, a.Body)
	}
	b1.Start()
	testkit.Eventually(t, "a backend back", func() bool { return e.App.Pool.Healthy() == 1 })
	if a := e.reserve(t, "NORMAL", "c", "recovered"); a.Status != 201 {
		t.Fatalf("after the backend returned: %d %s", a.Status, a.Body)
	}
}

// jsonGatewayError reports whether body is one of the edge's JSON errors and leaks no error text.
func jsonGatewayError(body string) bool {
	return strings.HasPrefix(body, `{"error":"`) && !strings.Contains(body, "dial") &&
		!strings.Contains(body, "127.0.0.1") && !strings.Contains(body, "fasthttp")
}
