package proxy

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/valyala/fasthttp"

	"vouchergate/testkit"
)

// stallingBackend answers reservations like fakeBackend, but each waits until the test lets it go.
type stallingBackend struct {
	*fakeBackend
	arrived chan string   // the orderId of each reservation that reached it
	letGo   chan struct{} // closed: reservations are answered
}

func newStallingBackend(limits map[string]int) *stallingBackend {
	return &stallingBackend{fakeBackend: newFakeBackend(limits), arrived: make(chan string, 16), letGo: make(chan struct{})}
}

func (b *stallingBackend) handle(ctx *fasthttp.RequestCtx) {
	if ctx.IsPost() {
		b.arrived <- string(ctx.PostBody())
		<-b.letGo
	}
	b.fakeBackend.handle(ctx)
}

// reserveAsync sends a reservation and delivers its answer on the returned channel.
func (e *edge) reserveAsync(t *testing.T, code, order string) <-chan answerOf {
	out := make(chan answerOf, 1)
	go func() { out <- e.reserve(t, code, order) }()
	return out
}

// awaitWaiting returns once n reservations have found every slot taken.
func (e *edge) awaitWaiting(t *testing.T, n float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(e.proxy.counts.reserveWaits) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%v reservations never waited for a slot", n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestReservationWaitingForASlotIsAnsweredWhenTheVoucherSellsOut(t *testing.T) {
	b := newStallingBackend(map[string]int{"FLASH": 1})
	addr, _ := testkit.ServeHTTP(t, b.handle)
	e := startEdge(t, edgeConfig{backends: []string{addr}, slots: 1, slotWait: time.Minute})

	first := e.reserveAsync(t, "FLASH", "o-1")
	<-b.arrived // o-1 holds the only slot, stalled at the backend
	late := e.reserveAsync(t, "FLASH", "o-2")
	e.awaitWaiting(t, 1)
	if err := e.cache.Apply(soldOutState("FLASH", "o-1")); err != nil {
		t.Fatal(err)
	}
	if a := <-late; a.status != 409 || a.body != `{"error":"OUT_OF_STOCK"}` {
		t.Fatalf("waiting new order after the sell-out: %d %s; want the edge's 409", a.status, a.body)
	}

	// A retry of the order holding the use waits on: it must reach the backend for its 201.
	retry := e.reserveAsync(t, "FLASH", "o-1")
	e.awaitWaiting(t, 2)
	close(b.letGo)
	for _, a := range []answerOf{<-first, <-retry} {
		if a.status != 201 {
			t.Fatalf("granted order o-1: %d %s; want 201", a.status, a.body)
		}
	}
	if n := b.reserves.Load(); n != 2 {
		t.Fatalf("backend saw %d reservations; want 2 (o-1 and its retry, not o-2)", n)
	}
}

func TestReservationFindingNoSlotInTimeIsAnswered503(t *testing.T) {
	b := newStallingBackend(map[string]int{"FLASH": 5})
	addr, _ := testkit.ServeHTTP(t, b.handle)
	e := startEdge(t, edgeConfig{backends: []string{addr}, slots: 1, slotWait: 20 * time.Millisecond})
	defer close(b.letGo)

	first := e.reserveAsync(t, "FLASH", "o-1")
	<-b.arrived
	a := e.reserve(t, "FLASH", "o-2")
	if a.status != 503 || errorCode(t, a) != "UNAVAILABLE" || string(a.header.Peek("Retry-After")) == "" {
		t.Fatalf("reservation finding no slot: %d %s; want 503 UNAVAILABLE with Retry-After", a.status, a.body)
	}
	b.letGo <- struct{}{} // lets o-1 through
	if a := <-first; a.status != 201 {
		t.Fatalf("o-1: %d %s", a.status, a.body)
	}
}
