package app_test

import (
	"encoding/json"
	"strings"
	"testing"

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
// edge answers sold-out vouchers without it.
func TestReadyzReportsTheCheckoutAPI(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.StartProcess(t, cfg)
	checkoutAddr, checkoutServer := testkit.ServeHTTP(t, func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(204) })
	ecfg := edgeConfig(cfg.NATSURL, cfg.NATSPrefix, b.Addr())
	ecfg.Upstream = checkoutAddr
	e := startEdge(t, ecfg)

	var ready struct {
		Ready    bool `json:"ready"`
		Checkout struct {
			Addr    string `json:"addr"`
			Answers bool   `json:"answers"`
			Status  int    `json:"status"`
		} `json:"checkout"`
	}
	a := e.doOps(t, "GET", "/readyz")
	if err := json.Unmarshal([]byte(a.Body), &ready); err != nil || a.Status != 200 || !ready.Ready ||
		ready.Checkout.Addr != checkoutAddr || !ready.Checkout.Answers || ready.Checkout.Status != 204 {
		t.Fatalf("/readyz with the checkout API up: %d %s", a.Status, a.Body)
	}
	_ = checkoutServer.Shutdown()
	a = e.doOps(t, "GET", "/readyz")
	if err := json.Unmarshal([]byte(a.Body), &ready); err != nil || a.Status != 200 || !ready.Ready || ready.Checkout.Answers {
		t.Fatalf("/readyz with the checkout API down: %d %s; want 200, ready, the checkout API not answering", a.Status, a.Body)
	}
}
