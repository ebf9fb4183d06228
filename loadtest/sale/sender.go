package sale

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// sender offers requests to one host on a fixed schedule, open loop: request i is due at
// start + i/rate whether or not earlier ones were answered. A pool of workers, one per
// connection, takes the due requests in order; when every connection is busy, the due ones
// wait in a queue, and their latency still counts from when they were due.
type sender struct {
	client  *fasthttp.HostClient
	host    string
	conns   int
	timeout time.Duration
	meter   *meter // nil: no progress counted
}

func newSender(host string, tls bool, conns int, timeout time.Duration, m *meter) *sender {
	return &sender{
		client: &fasthttp.HostClient{
			Addr: host, IsTLS: tls, MaxConns: conns, Name: "vouchergate-loadtest-sale",
			ReadTimeout: timeout, WriteTimeout: timeout, MaxIdemponentCallAttempts: 1,
			NoDefaultUserAgentHeader: true, DisableHeaderNamesNormalizing: true,
		},
		host: host, conns: conns, timeout: timeout, meter: m,
	}
}

// writer sets request i's method, path and body in req, reusing buf for the body; it returns
// the buffer.
type writer func(i int, req *fasthttp.Request, buf []byte) []byte

// offer sends n requests at rate, each written by write, and returns their outcomes. It
// returns early, with the rest NotSent, when ctx ends.
func (s *sender) offer(ctx context.Context, n int, rate float64, write writer) []Outcome {
	// The next phase has a sender of its own: this one's connections must not stay open beside
	// its, counting against a server's cap on connections from one address.
	defer s.client.CloseIdleConnections()
	defer s.dialAhead(ctx, min(s.conns, n))()
	out := make([]Outcome, n)
	start := time.Now()
	due := func(i int) time.Duration { return time.Duration(float64(i) * float64(time.Second) / rate) }
	queue := make(chan int, min(n, 1<<16))
	go func() {
		defer close(queue)
		for i := range n {
			if wait := due(i) - time.Since(start); wait > 0 {
				time.Sleep(wait) // wakes late by tens of µs; the requests due meanwhile go at once
			}
			s.meter.release()
			select {
			case queue <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range min(s.conns, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			var buf []byte
			for i := range queue {
				if ctx.Err() != nil {
					continue // interrupted: what is still queued stays NotSent
				}
				o := &out[i]
				o.Scheduled, o.Sent = due(i), time.Since(start)
				req.Reset()
				buf = write(i, req, buf)
				req.Header.SetHost(s.host)
				err := s.client.DoTimeout(req, resp, s.timeout)
				o.Done = time.Since(start)
				if err != nil {
					o.State, o.Error = Failed, failure(err)
				} else {
					o.State, o.Status = Answered, resp.StatusCode()
					if a, err := ParseAnswer(resp.Body()); err == nil {
						o.Discount, o.Error = a.Discount, intern(a.Error)
					} else if len(resp.Body()) > 0 {
						o.Error = "unreadable body"
					}
				}
				s.meter.count(o)
			}
		}()
	}
	wg.Wait()
	return out
}

// dialAhead opens up to n connections before the schedule starts, for the client to take
// first, so that the sale's opening measures the server and not this generator dialling (a
// shop's edge sits behind a load balancer whose connections are open before the sale). Should
// a dial fail, the rest are dialled when needed, and the requests meet the failure themselves.
// It returns what closes the connections the client did not take.
func (s *sender) dialAhead(ctx context.Context, n int) (closeUntaken func()) {
	ready := make(chan net.Conn, n)
	var d net.Dialer
	for range n {
		c, err := d.DialContext(ctx, "tcp", s.host)
		if err != nil {
			break
		}
		ready <- c
	}
	s.client.Dial = func(addr string) (net.Conn, error) {
		select {
		case c := <-ready:
			return c, nil
		default:
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	return func() {
		for {
			select {
			case c := <-ready:
				c.Close()
			default:
				return
			}
		}
	}
}

// failure names what went wrong with a request in a word or two, so failures can be counted.
func failure(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, fasthttp.ErrConnectionClosed):
		return "connection closed"
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		return "no free connection"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Op + " error"
	}
	return "transport error"
}
