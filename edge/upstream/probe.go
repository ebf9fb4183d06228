package upstream

import (
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// probeFresh is how long a probe's answer stands: /readyz asked again within it (a kubelet and
// a blackbox scrape a moment apart) shares it rather than asking the checkout API again.
const probeFresh = time.Second

// probe asks the checkout API whether it answers, for the ops /readyz. One probe goes out at a
// time, on a connection of its own closed after it: a kept-alive one could have been closed
// by the checkout API between probes, and the probe would report a failure that is not. Those
// asked while it runs wait for its answer (at most its timeout); those asked within probeFresh
// of it take that answer too. It is safe for concurrent use.
type probe struct {
	hc      *fasthttp.HostClient
	url     string
	timeout time.Duration

	mu     sync.Mutex // held while a probe runs
	at     time.Time  // when the last answer came; zero: none yet
	status int
	err    error
}

func newProbe(addr string, tls bool, path string, dialTimeout, timeout time.Duration) *probe {
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	return &probe{
		hc: &fasthttp.HostClient{
			Addr: addr, IsTLS: tls, MaxConns: 1, NoDefaultUserAgentHeader: true,
			DialTimeout:               dialer(min(dialTimeout, timeout)),
			MaxIdemponentCallAttempts: 1, MaxResponseBodySize: 64 << 10,
			ReadTimeout: timeout, WriteTimeout: timeout,
		},
		url: scheme + addr + path, timeout: timeout,
	}
}

// ask returns the status the checkout API answered the probe with, or why it did not answer.
func (p *probe) ask() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && time.Since(p.at) < probeFresh {
		return p.status, p.err
	}
	p.status, p.err = p.once()
	p.at = time.Now()
	return p.status, p.err
}

func (p *probe) once() (int, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(p.url)
	req.Header.SetMethod(fasthttp.MethodHead)
	req.SetConnectionClose()
	if err := p.hc.DoTimeout(req, resp, p.timeout); err != nil {
		return 0, err
	}
	return resp.StatusCode(), nil
}
