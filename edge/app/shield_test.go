package app_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
	"vouchergate/testkit"
)

// The shield: a voucher the NATS state bucket says is sold out stays answered 409 at the edge
// with every backend dead. Most runs use the edge's sold-out durations divided by scale
// (VG_EDGE_SOLDOUT_TTL 5 s → 1 s, VG_EDGE_SOLDOUT_KEEP 30 s → 6 s, refresh 2 s → 400 ms; at
// 1/20 a confirmation late by a quarter of a second, on a machine running much else under the
// race detector, let an entry lapse),
// and ask at the moments divided by it too: +0, +6, +30 and +60 s at the defaults. Nothing in
// the edge's answer depends on a duration but through these settings, so the answers are the
// defaults' at those moments; one run (not with -short) holds the real defaults for a minute.
const scale = 5

func shieldConfig(natsURL, natsPrefix, backend string, scale time.Duration) config.Edge {
	ecfg := edgeConfig(natsURL, natsPrefix, backend)
	ecfg.SoldOutTTL = 5 * time.Second / scale
	ecfg.SoldOutRefresh = 2 * time.Second / scale
	ecfg.SoldOutKeep = 30 * time.Second / scale
	ecfg.StateEvery = 200 * time.Millisecond / scale
	return ecfg
}

// sellOutAndKill sells a 3-use flash voucher out through e in front of the backend process p,
// waits for e to hold the sell-out, and SIGKILLs p. It returns the granted orders and when p
// was killed.
func sellOutAndKill(t *testing.T, p *backendtest.Process, e *edge, code string) ([]string, time.Time) {
	t.Helper()
	granted := sellOut(t, p.Client(), e, code, 3)
	if a := e.reserve(t, code, "late", "late-0"); a.Status != 409 {
		t.Fatalf("first late order: %d %s", a.Status, a.Body)
	}
	testkit.Eventually(t, "the edge holds the sell-out", func() bool { return e.knows(code) })
	p.Kill()
	return granted, time.Now()
}

func TestSoldOutStaysAnsweredWithEveryBackendKilledWhileNATSSaysSo(t *testing.T) {
	t.Run("at 1/5 of the defaults", func(t *testing.T) {
		t.Parallel()
		shieldHolds(t, scale)
	})
	t.Run("at the defaults", func(t *testing.T) {
		if testing.Short() {
			t.Skip("a minute and more")
		}
		t.Parallel()
		shieldHolds(t, 1)
	})
}

// shieldHolds sells a voucher out through an edge whose sold-out durations are the defaults
// divided by scale, kills every backend, and asks for new orders and their dry runs at +0, +6,
// +30 and +60 s (divided by scale): each answered from memory. Then a backend returns and
// releases a hold, and the edge sells again within a second.
func shieldHolds(t *testing.T, scale time.Duration) {
	cfg := backendtest.Config(t)
	p := backendtest.StartProcess(t, cfg)
	e := startEdge(t, shieldConfig(cfg.NATSURL, cfg.NATSPrefix, p.Addr(), scale))
	granted, killed := sellOutAndKill(t, p, e, "SHIELD")

	for i, at := range []time.Duration{0, 6 * time.Second, 30 * time.Second, 60 * time.Second} {
		time.Sleep(time.Until(killed.Add(at / scale)))
		a := e.reserve(t, "SHIELD", fmt.Sprintf("new-%d", i), fmt.Sprintf("new-order-%d", i))
		if a.Status != 409 || !strings.Contains(a.Body, "OUT_OF_STOCK") {
			t.Fatalf("new order %v (at the defaults) after every backend was killed: %d %s; want the edge's 409", at, a.Status, a.Body)
		}
		a = e.do(t, "POST", "/vouchers/SHIELD/validate",
			fmt.Sprintf(`{"customerId":"dry-%d","orderId":"dry-order-%d","orderAmount":100000}`, i, i))
		if a.Status != 200 || a.Body != `{"valid":false,"error":"OUT_OF_STOCK"}` {
			t.Fatalf("dry run of a new order %v (at the defaults) after every backend was killed: %d %s; want the edge's not valid", at, a.Status, a.Body)
		}
		if i == 0 {
			testkit.Eventually(t, "the killed backend out of service", func() bool { return e.App.Pool.Healthy() == 0 })
		}
	}
	m := testkit.ScrapeMetrics(t, "http://"+e.Ops+"/metrics")
	if n := m.Value(t, "vg_edge_soldout_unconfirmed_vouchers"); n != 0 {
		t.Fatalf("vg_edge_soldout_unconfirmed_vouchers = %v with NATS confirming; want 0", n)
	}
	// A holder's retry still goes to a backend: none answers.
	if a := e.reserve(t, "SHIELD", "cust-0", granted[0]); a.Status != 503 {
		t.Fatalf("a holder's retry with every backend down: %d %s; want 503 (forwarded), not 409", a.Status, a.Body)
	}

	// A backend returns and releases a hold: every edge sells again within a second.
	p.Start()
	admin := p.Client()
	testkit.Eventually(t, "the backend back in service", func() bool { return e.App.Pool.Healthy() == 1 })
	if status, body := admin.Do(t, "DELETE", "/vouchers/SHIELD/reservations/"+granted[0], nil); status != 200 {
		t.Fatalf("release: %d %s", status, body)
	}
	released := time.Now()
	for i := 0; ; i++ {
		a := e.reserve(t, "SHIELD", fmt.Sprintf("after-%d", i), fmt.Sprintf("after-order-%d", i))
		if a.Status == 201 {
			break
		}
		if a.Status != 409 {
			t.Fatalf("new order after the release: %d %s", a.Status, a.Body)
		}
		if time.Since(released) > time.Second {
			t.Fatal("the edge still answers 409 a second after the release")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("sold again %v after the release", time.Since(released).Round(time.Millisecond))
}

func TestWithNATSDownTooTheEdgeKeepsTheSellOutForTheConfiguredTime(t *testing.T) {
	nats := testkit.StartNATS(t)
	cfg := backendtest.Config(t)
	cfg.NATSURL = nats.URL()
	p := backendtest.StartProcess(t, cfg)
	ecfg := shieldConfig(nats.URL(), cfg.NATSPrefix, p.Addr(), scale)
	ecfg.SoldOutKeep = 4 * time.Second // a confirmation every 500 ms
	keep, check := ecfg.SoldOutKeepFor(), ecfg.StateCheckEvery()
	e := startEdge(t, ecfg)
	granted, _ := sellOutAndKill(t, p, e, "KEPT")
	nats.Kill()
	down := time.Now()
	testkit.Eventually(t, "the edge sees NATS down", func() bool { return !e.App.Listener.Connected() })

	// Kept from the last confirmation, which came at most one check before NATS died, for keep.
	keptUntil, forwardedBy := down.Add(keep-2*check), down.Add(keep+check)
	var toldUnconfirmed bool
	for i := 0; ; i++ {
		a := e.reserve(t, "KEPT", fmt.Sprintf("new-%d", i), fmt.Sprintf("new-order-%d", i))
		if a.Status == 409 {
			if time.Now().After(forwardedBy) {
				t.Fatalf("still 409 %v after NATS died; the keep is %v", time.Since(down).Round(time.Millisecond), keep)
			}
			m := testkit.ScrapeMetrics(t, "http://"+e.Ops+"/metrics")
			toldUnconfirmed = toldUnconfirmed || m.Value(t, "vg_edge_soldout_unconfirmed_vouchers") == 1
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if a.Status != 503 {
			t.Fatalf("new order once the keep is over, every backend down: %d %s; want 503", a.Status, a.Body)
		}
		if time.Now().Before(keptUntil) {
			t.Fatalf("forwarded %v after NATS died; the keep is %v", time.Since(down).Round(time.Millisecond), keep)
		}
		break
	}
	t.Logf("forwarded %v after NATS died (keep %v)", time.Since(down).Round(time.Millisecond), keep)
	if !toldUnconfirmed {
		t.Fatal("vg_edge_soldout_unconfirmed_vouchers never said the sell-out was kept without NATS")
	}
	if a := e.reserve(t, "KEPT", "cust-0", granted[0]); a.Status != 503 {
		t.Fatalf("a holder's retry: %d %s; want 503", a.Status, a.Body)
	}
}
