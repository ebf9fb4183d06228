package upstream

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/testkit"
)

// The pool opens Warm connections to a backend when it starts, and keeps them open past the
// client's idle timeout by using them again: a sale's opening finds them open, and no new one is
// dialled while the edge idles.
func TestPoolKeepsWarmConnectionsOpen(t *testing.T) {
	const warm = 8
	var opened, open atomic.Int32
	var mu sync.Mutex
	calls := 0
	release := make(chan struct{})
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			// the first health check passes at once; the first warming's calls then wait until
			// all are in, so that each holds a connection of its own
			mu.Lock()
			calls++
			n := calls
			if n == warm+1 {
				close(release)
			}
			mu.Unlock()
			if n == 1 {
				return
			}
			select {
			case <-release:
			case <-time.After(2 * time.Second):
			}
		},
		ConnState: func(_ net.Conn, s fasthttp.ConnState) {
			switch s {
			case fasthttp.StateNew:
				opened.Add(1)
				open.Add(1)
			case fasthttp.StateClosed, fasthttp.StateHijacked:
				open.Add(-1)
			}
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { _ = srv.Shutdown() })

	o := testPoolOptions()
	o.Warm, o.Client.IdleTimeout = warm, 400*time.Millisecond
	p := NewPool([]string{ln.Addr().String()}, []bool{false}, o, testkit.QuietLog)
	t.Cleanup(p.Close)
	// the health checker's own connection is one more
	if n := opened.Load(); n != warm+1 {
		t.Fatalf("%d connections opened by the time the pool is built; want the %d warm ones and the checker's", n, warm)
	}
	first := opened.Load()
	time.Sleep(3 * o.Client.IdleTimeout) // idle: unused, the connections would be closed by now
	if n := open.Load(); n < warm+1 {
		t.Errorf("%d connections open after %v idle; want the %d warm ones still open", n, 3*o.Client.IdleTimeout, warm)
	}
	if n := opened.Load(); n != first {
		t.Errorf("%d connections dialled while idle; want none (the warm ones used again)", n-first)
	}
}
