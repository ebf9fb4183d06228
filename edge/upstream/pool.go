package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// ErrNoBackend is returned by Pool.Do when no backend is healthy.
var ErrNoBackend = errors.New("no healthy backend")

// PoolOptions configure a Pool.
type PoolOptions struct {
	Client        Options
	HealthEvery   time.Duration // between health checks of each backend
	HealthTimeout time.Duration // for one check
	HealthFalls   int           // failed checks in a row that take a backend out
	HealthPath    string        // "/healthz" when empty
	APIKey        string        // the edge's service key, sent on Fetch (state reads); "": none
	// Warm is how many connections to each healthy backend are kept open while idle (warm.go),
	// so that a sale's opening does not dial them; 0: none.
	Warm int
}

// Pool balances calls over backends: the healthy one with the fewest calls in flight, taking
// turns among equals. A backend is taken out when it refuses a connection or fails HealthFalls
// checks in a row, and put back by its first passing check. It is safe for concurrent use.
type Pool struct {
	members []*member
	turn    atomic.Uint32
	opts    PoolOptions
	log     *slog.Logger

	stop chan struct{}
	done sync.WaitGroup
}

type member struct {
	*Client
	healthClient *fasthttp.HostClient // its own connection, so a busy pool does not fail the check
	up           atomic.Bool
	fails        int       // checks failed in a row; only the checker goroutine uses it
	warmed       time.Time // when its connections were last warmed; only the checker goroutine uses it
}

// Backend describes one member of a Pool.
type Backend struct {
	Addr    string
	Healthy bool
	Pending int
}

// NewPool checks every backend once, then returns a Pool that keeps checking them.
func NewPool(addrs []string, tls []bool, o PoolOptions, log *slog.Logger) *Pool {
	if o.HealthPath == "" {
		o.HealthPath = "/healthz"
	}
	p := &Pool{opts: o, log: log, stop: make(chan struct{})}
	for i, addr := range addrs {
		m := &member{Client: NewClient(addr, tls[i], o.Client)}
		m.healthClient = &fasthttp.HostClient{
			Addr: addr, IsTLS: tls[i], MaxConns: 1, NoDefaultUserAgentHeader: true,
			DialTimeout:               dialer(min(o.Client.DialTimeout, o.HealthTimeout)),
			MaxIdemponentCallAttempts: 1, MaxResponseBodySize: 64 << 10,
			ReadTimeout: o.HealthTimeout, WriteTimeout: o.HealthTimeout,
		}
		p.members = append(p.members, m)
	}
	var wg sync.WaitGroup
	for _, m := range p.members {
		wg.Add(1)
		go func() { defer wg.Done(); p.checkOne(m); p.warm(m) }()
	}
	wg.Wait()
	p.done.Add(1)
	go p.checkLoop()
	return p
}

// Close stops the health checks and closes the idle connections to the backends.
func (p *Pool) Close() {
	close(p.stop)
	p.done.Wait()
	for _, m := range p.members {
		m.Close()
		m.healthClient.CloseIdleConnections()
	}
}

// Backends reports each backend's state.
func (p *Pool) Backends() []Backend {
	out := make([]Backend, len(p.members))
	for i, m := range p.members {
		out[i] = Backend{Addr: m.addr, Healthy: m.up.Load(), Pending: m.Pending()}
	}
	return out
}

// Healthy is the number of backends in service.
func (p *Pool) Healthy() int {
	n := 0
	for _, m := range p.members {
		if m.up.Load() {
			n++
		}
	}
	return n
}

// Do sends req to a healthy backend and reads its answer into resp, by deadline. When the
// request could not be sent there (refused connection, no free connection), it goes to
// another healthy backend once: the request was never seen, so this is safe for any method.
func (p *Pool) Do(req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	first := p.pick(nil)
	if first == nil {
		return ErrNoBackend
	}
	err := first.Do(req, resp, deadline)
	if err == nil || !NotSent(err) {
		return err
	}
	if Refused(err) {
		p.takeOut(first, err)
	}
	second := p.pick(first)
	if second == nil {
		return err
	}
	return second.Do(req, resp, deadline)
}

// pick returns the healthy backend with the fewest calls in flight, other than except, or nil.
func (p *Pool) pick(except *member) *member {
	n := len(p.members)
	start := int(p.turn.Add(1) % uint32(n))
	var best *member
	bestPending := 0
	for i := range n {
		m := p.members[(start+i)%n]
		if m == except || !m.up.Load() {
			continue
		}
		if pending := m.Pending(); best == nil || pending < bestPending {
			best, bestPending = m, pending
		}
	}
	return best
}

// takeOut takes m out of service. Its kept-alive connections go too, here and again when it is
// put back: a backend that was killed or restarted left them dead, and a reservation (a POST,
// never retried once written) sent on one would fail although the backend is up again.
func (p *Pool) takeOut(m *member, err error) {
	if m.up.CompareAndSwap(true, false) {
		m.Close()
		p.log.Warn("backend out of service", "addr", m.addr, "err", err)
	}
}

func (p *Pool) checkLoop() {
	defer p.done.Done()
	t := time.NewTicker(p.opts.HealthEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		var wg sync.WaitGroup
		for _, m := range p.members {
			wg.Add(1)
			go func() { defer wg.Done(); p.checkOne(m); p.keepWarm(m) }()
		}
		wg.Wait()
	}
}

func (p *Pool) checkOne(m *member) {
	err := p.probe(m)
	if err == nil {
		m.fails = 0
		if m.up.CompareAndSwap(false, true) {
			m.Close() // an idle connection now is one kept from before it went out
			p.log.Info("backend in service", "addr", m.addr)
		}
		return
	}
	m.fails++
	if m.fails >= p.opts.HealthFalls || Refused(err) {
		p.takeOut(m, err)
	}
}

func (p *Pool) probe(m *member) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	scheme := "http"
	if m.tls {
		scheme = "https"
	}
	req.SetRequestURI(scheme + "://" + m.addr + p.opts.HealthPath)
	req.Header.SetMethod(fasthttp.MethodGet)
	if err := m.healthClient.DoTimeout(req, resp, p.opts.HealthTimeout); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return fmt.Errorf("health check: status %d", resp.StatusCode())
	}
	return nil
}

// Fetch sends a GET for path to a healthy backend, bounded by ctx, and returns the status and
// a copy of the body.
func (p *Pool) Fetch(ctx context.Context, path string) (int, []byte, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(p.opts.HealthTimeout)
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(path)
	req.Header.SetMethod(fasthttp.MethodGet)
	req.Header.SetHost("vouchergate-backend")
	if p.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+p.opts.APIKey)
	}
	if err := p.Do(req, resp, deadline); err != nil {
		return 0, nil, err
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...), nil
}
