package app_test

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"vouchergate/testkit"
)

// 20 clients each download 100 MiB from a checkout API process through the edge process: every
// one gets all of it, and the edge's memory stays bounded by its buffers, not the answers' size.
// (Before: 10 MiB answers took the edge from 31 to 345 MB, 100 MiB ones to 2,647 MB, still held
// 20 s later, and 7 of 20 got 504.)
func TestStreamedDownloadsKeepTheEdgeSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("2 GiB through the edge")
	}
	const clients, size = 20, 100 << 20
	checkout := testkit.StartCheckoutStandIn(t, 0).Addr
	p := startEdgeProcess(t, "VG_EDGE_UPSTREAM="+checkout)
	before := p.status(t, "VmRSS")

	start := time.Now()
	got := make([]int64, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(fmt.Sprintf("http://%s/download?size=%d&piece=%d", p.Addr, size, 256<<10))
			if err != nil {
				t.Errorf("client %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			got[i], err = io.Copy(io.Discard, resp.Body)
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("client %d: %d, %d bytes, %v", i, resp.StatusCode, got[i], err)
			}
		}()
	}
	wg.Wait()
	peak, after := p.status(t, "VmHWM"), p.status(t, "VmRSS")
	t.Logf("%d clients × %d MiB in %v: edge RSS %d kB before, peak %d kB, %d kB after",
		clients, size>>20, time.Since(start).Round(time.Millisecond), before, peak, after)
	for i, n := range got {
		if n != size {
			t.Errorf("client %d got %d bytes; want %d", i, n, size)
		}
	}
	if peak > 100<<10 {
		t.Fatalf("the edge's peak resident memory was %d kB streaming %d answers of %d MiB; want under 100 MB", peak, clients, size>>20)
	}
}
