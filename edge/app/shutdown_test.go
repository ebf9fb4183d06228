package app_test

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"vouchergate/testkit"
)

// Close lets a reservation in flight through the edge finish and relays its answer, while the
// ops listener's /readyz says 503 "draining"; it returns once that request is done.
func TestCloseFinishesReservationsInFlight(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	backend, _ := testkit.ServeHTTP(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/vouchers/DRAIN/reservations" {
			entered <- struct{}{}
			<-release
			ctx.SetStatusCode(fasthttp.StatusCreated)
			ctx.SetBodyString(`{"orderId":"o1","discountAmount":5}`)
			return
		}
		ctx.SetBodyString(`{"status":"ok"}`)
	})
	e := startEdge(t, edgeConfig(testkit.NATSURL, testkit.NATSPrefix(), backend))
	testkit.Eventually(t, "the backend healthy", func() bool { return e.App.Pool.Healthy() == 1 })

	got := make(chan answer, 1)
	go func() { got <- e.reserve(t, "DRAIN", "c1", "o1") }()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- e.App.Close() }()
	testkit.Eventually(t, "ops /readyz says draining", func() bool {
		a := e.doOps(t, "GET", "/readyz")
		return a.Status == 503 && strings.Contains(a.Body, `"draining":true`)
	})
	close(release)
	if a := <-got; a.Status != 201 || !strings.Contains(a.Body, `"o1"`) {
		t.Fatalf("the reservation in flight at Close: %d %s; want the backend's 201", a.Status, a.Body)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
}
