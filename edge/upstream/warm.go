package upstream

import (
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Warm connections. A sale opens with thousands of reservations a second, each needing a
// connection to a backend: dialled then, they add a connect (and, on a busy machine, a backend
// accept and goroutine) to the opening's first answers. So the pool keeps PoolOptions.Warm
// connections to each healthy backend open: when the edge starts and when a backend comes back
// it opens them, and it uses them again before the client's idle timeout would close them.
// fasthttp opens a connection for each call in flight when none is idle, so warming is that
// many health calls at once on the calls' own client.

// warm opens up to PoolOptions.Warm connections to m, if it is healthy.
func (p *Pool) warm(m *member) {
	n := p.opts.Warm
	if n <= 0 || !m.up.Load() {
		return
	}
	m.warmed = time.Now()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start // all at once, so each needs a connection of its own
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI(p.opts.HealthPath)
			req.Header.SetMethod(fasthttp.MethodGet)
			req.Header.SetHost("vouchergate-backend")
			_ = m.Do(req, resp, time.Now().Add(p.opts.HealthTimeout))
		}()
	}
	close(start)
	wg.Wait()
}

// keepWarm warms m again when half the client's idle timeout passed since it last was, or as
// soon as it is back in service.
func (p *Pool) keepWarm(m *member) {
	if !m.up.Load() {
		m.warmed = time.Time{}
		return
	}
	if m.warmed.IsZero() || time.Since(m.warmed) >= p.opts.Client.IdleTimeout/2 {
		p.warm(m)
	}
}
