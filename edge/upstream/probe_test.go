package upstream

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/testkit"
)

// probedAPI is a checkout API answering the probe with 204 after wait, closing idle
// connections after idle, and counting the probes it answered.
func probedAPI(t *testing.T, wait, idle time.Duration) (addr string, probes *atomic.Int32) {
	t.Helper()
	probes = new(atomic.Int32)
	addr = testkit.ServeNetHTTP(t, &http.Server{IdleTimeout: idle, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
		time.Sleep(wait)
		w.WriteHeader(http.StatusNoContent)
	})})
	return addr, probes
}

// Probes asked at once (a kubelet and a blackbox scrape on /readyz) all get the checkout
// API's answer: one probe goes out, the others wait for it and share its answer, as do those
// asked within a second of it. (Before: one connection and no wait, so all but one failed.)
func TestProbesAskedAtOnceShareOneAnswer(t *testing.T) {
	addr, probes := probedAPI(t, 100*time.Millisecond, 0)
	c := NewCheckout(addr, false, CheckoutOptions{DialTimeout: time.Second, ProbeTimeout: time.Second, IdleConn: 2 * time.Second})
	t.Cleanup(c.Close)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if status, err := c.Probe(); status != http.StatusNoContent || err != nil {
				t.Errorf("probe %d of 8 at once: %d, %v; want the checkout API's 204", i, status, err)
			}
		}()
	}
	wg.Wait()
	if status, err := c.Probe(); status != http.StatusNoContent || err != nil {
		t.Errorf("a probe just after: %d, %v", status, err)
	}
	if n := probes.Load(); n != 1 {
		t.Errorf("the checkout API was probed %d times for 9 probes within a second; want once", n)
	}
}

// A probe after the checkout API closed its idle connections (here after 300 ms, well below
// the edge's keep-alive) is answered: it does not go out on a connection the API closed.
// (Before: the probe's kept-alive connection was reused unchecked and the probe failed.)
func TestAProbeAfterTheAPIClosedItsIdleConnectionsIsAnswered(t *testing.T) {
	addr, probes := probedAPI(t, 0, 300*time.Millisecond)
	c := NewCheckout(addr, false, CheckoutOptions{DialTimeout: time.Second, ProbeTimeout: time.Second, IdleConn: 10 * time.Second})
	t.Cleanup(c.Close)
	for i := range 3 {
		if status, err := c.Probe(); status != http.StatusNoContent || err != nil {
			t.Fatalf("probe %d (1.5 s apart): %d, %v; want 204", i+1, status, err)
		}
		time.Sleep(1500 * time.Millisecond) // past the shared answer's second and the API's idle timeout
	}
	if n := probes.Load(); n != 3 {
		t.Fatalf("the checkout API was probed %d times; want 3", n)
	}
}
