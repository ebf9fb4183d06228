package app_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

func TestStatusEndpoints(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.StartProcess(t, cfg)
	admin := backendtest.Start(t, cfg)
	e := startEdge(t, edgeConfig(cfg.NATSURL, cfg.NATSPrefix, b.Addr()))
	sellOut(t, admin, e, "STATUS", 2)
	testkit.Eventually(t, "sell-out learned", func() bool { return e.knows("STATUS") })

	if a := e.do(t, "GET", "/healthz", ""); a.Status != 200 || a.Body != `{"status":"ok"}` {
		t.Fatalf("/healthz: %d %s", a.Status, a.Body)
	}
	var ready struct {
		Ready    bool `json:"ready"`
		Backends []struct {
			Addr    string `json:"addr"`
			Healthy bool   `json:"healthy"`
		} `json:"backends"`
		NATS struct {
			Connected, Synced bool
		} `json:"nats"`
		SoldOut []string `json:"soldOut"`
	}
	a := e.doOps(t, "GET", "/readyz")
	if err := json.Unmarshal([]byte(a.Body), &ready); err != nil || a.Status != 200 {
		t.Fatalf("/readyz: %d %s", a.Status, a.Body)
	}
	if !ready.Ready || len(ready.Backends) != 1 || !ready.Backends[0].Healthy || !ready.NATS.Connected || !ready.NATS.Synced ||
		len(ready.SoldOut) != 1 || ready.SoldOut[0] != "STATUS" {
		t.Fatalf("/readyz says %s", a.Body)
	}
	// The public port says only whether the edge is ready: no addresses, no sold-out list, no
	// metrics.
	if a := e.do(t, "GET", "/readyz", ""); a.Status != 200 || a.Body != `{"ready":true}` {
		t.Fatalf("public /readyz: %d %s; want 200 {\"ready\":true} and nothing more", a.Status, a.Body)
	}
	if a := e.do(t, "GET", "/metrics", ""); a.Status != 404 {
		t.Fatalf("public /metrics: %d; want 404 (metrics are on the ops listener)", a.Status)
	}

	b.Kill()
	testkit.Eventually(t, "backend out", func() bool { return e.App.Pool.Healthy() == 0 })
	if a := e.doOps(t, "GET", "/readyz"); a.Status != 503 || !strings.Contains(a.Body, `"ready":false`) {
		t.Fatalf("/readyz with no backend: %d %s", a.Status, a.Body)
	}
	if a := e.do(t, "GET", "/readyz", ""); a.Status != 503 || a.Body != `{"ready":false}` {
		t.Fatalf("public /readyz with no backend: %d %s", a.Status, a.Body)
	}
	if n := testkit.ScrapeMetrics(t, "http://"+e.Ops+"/metrics").Value(t, "vg_edge_backends_healthy"); n != 0 {
		t.Fatalf("vg_edge_backends_healthy is %v with the backend killed; want 0", n)
	}
}

// The ops /readyz reports whether the checkout API answers, and does not depend on it: the
// edge answers sold-out vouchers without it. Asked by several at once (a kubelet and a
// blackbox scrape), each gets the answer; once the API is down, /readyz says so within its
// probe's second. (Before: /readyz asked at once reported all but one "answers": false.)
func TestReadyzReportsTheCheckoutAPI(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.StartProcess(t, cfg)
	checkoutAddr, checkoutServer := testkit.ServeHTTP(t, func(ctx *fasthttp.RequestCtx) {
		time.Sleep(50 * time.Millisecond) // the probes at once overlap
		ctx.SetStatusCode(204)
	})
	ecfg := edgeConfig(cfg.NATSURL, cfg.NATSPrefix, b.Addr())
	ecfg.Upstream = checkoutAddr
	e := startEdge(t, ecfg)

	type readiness struct {
		Ready    bool `json:"ready"`
		Checkout struct {
			Addr    string `json:"addr"`
			Answers bool   `json:"answers"`
			Status  int    `json:"status"`
		} `json:"checkout"`
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ready readiness
			a := e.doOps(t, "GET", "/readyz")
			if err := json.Unmarshal([]byte(a.Body), &ready); err != nil || a.Status != 200 || !ready.Ready ||
				ready.Checkout.Addr != checkoutAddr || !ready.Checkout.Answers || ready.Checkout.Status != 204 {
				t.Errorf("/readyz %d of 4 at once with the checkout API up: %d %s", i+1, a.Status, a.Body)
			}
		}()
	}
	wg.Wait()
	_ = checkoutServer.Shutdown()
	testkit.Eventually(t, "/readyz reporting the checkout API down", func() bool {
		var ready readiness
		a := e.doOps(t, "GET", "/readyz")
		if err := json.Unmarshal([]byte(a.Body), &ready); err != nil || a.Status != 200 || !ready.Ready {
			t.Fatalf("/readyz with the checkout API down: %d %s; want 200, ready", a.Status, a.Body)
		}
		return !ready.Checkout.Answers
	})
}
