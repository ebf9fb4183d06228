// Package drain serves a fasthttp server and shuts it down without dropping a request that
// reached it: the backend and the edge both stop this way on SIGTERM.
//
// fasthttp's Shutdown closes the listener and, at once, every connection that is between two
// requests. A keep-alive client may have written its next request on such a connection just
// before the signal: it is in the server's socket but not read yet, and the client gets a
// reset for a request it sent. So a Server first stops accepting and answers every request
// with Connection: close; once no connection is left, or after IdleWait, fasthttp's Shutdown
// closes what is left idle and waits for the requests still being served.
package drain

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// IdleWait bounds how long Shutdown waits for connections to close before closing those still
// open between requests. A request written before the signal is in the server's socket by
// then; it only needs its connection's goroutine to be scheduled to be read, which takes
// milliseconds even on a busy machine. A client that keeps an idle connection open and sends
// nothing costs the shutdown this long, so it is short.
const IdleWait = 250 * time.Millisecond

// poll is how often Shutdown looks whether the connections have closed.
const poll = 5 * time.Millisecond

// Server is a fasthttp server with a drained shutdown. Build it with New before serving.
type Server struct {
	http     *fasthttp.Server
	draining atomic.Bool
	conns    atomic.Int64 // open connections

	mu  sync.Mutex
	lns []net.Listener
}

// New takes over s: its Handler answers with Connection: close once the shutdown has begun, and
// its ConnState counts the open connections (calling the one s had). Call it before s serves.
func New(s *fasthttp.Server) *Server {
	d := &Server{http: s}
	handle := s.Handler
	s.Handler = func(ctx *fasthttp.RequestCtx) {
		handle(ctx)
		if d.draining.Load() {
			ctx.SetConnectionClose() // the client takes its next request elsewhere
		}
	}
	next := s.ConnState
	s.ConnState = func(c net.Conn, st fasthttp.ConnState) {
		switch st {
		case fasthttp.StateNew:
			d.conns.Add(1)
		case fasthttp.StateClosed, fasthttp.StateHijacked:
			d.conns.Add(-1)
		}
		if next != nil {
			next(c, st)
		}
	}
	return d
}

// Serve answers on ln until Shutdown, which closes ln.
func (d *Server) Serve(ln net.Listener) error {
	ln = &closeOnce{Listener: ln}
	d.mu.Lock()
	d.lns = append(d.lns, ln)
	d.mu.Unlock()
	return d.http.Serve(ln)
}

// Draining reports whether Shutdown has begun: the process is not ready for new work.
func (d *Server) Draining() bool { return d.draining.Load() }

// Shutdown stops accepting connections, lets the clients on open ones take their answers and
// leave (up to IdleWait), then closes the idle connections left and waits, until ctx ends, for
// the requests still being served. It returns ctx's error if some were still being served.
func (d *Server) Shutdown(ctx context.Context) error {
	d.draining.Store(true)
	d.mu.Lock()
	lns := d.lns
	d.mu.Unlock()
	for _, ln := range lns {
		_ = ln.Close()
	}
	idle, cancel := context.WithTimeout(ctx, IdleWait)
	tick := time.NewTicker(poll)
	for d.conns.Load() > 0 && idle.Err() == nil {
		select {
		case <-idle.Done():
		case <-tick.C:
		}
	}
	tick.Stop()
	cancel()
	return d.http.ShutdownWithContext(ctx)
}

// closeOnce is a listener whose second Close does nothing: Shutdown closes it, then fasthttp's
// Shutdown closes it again.
type closeOnce struct {
	net.Listener
	once sync.Once
	err  error
}

func (l *closeOnce) Close() error {
	l.once.Do(func() { l.err = l.Listener.Close() })
	return l.err
}
