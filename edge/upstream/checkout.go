package upstream

import (
	"errors"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// CheckoutOptions configure the client of the checkout API.
type CheckoutOptions struct {
	DialTimeout    time.Duration
	ConnWait       time.Duration // waiting for a free connection when MaxConns are busy; 0: fail at once
	MaxConns       int
	MaxHeaderBytes int           // an answer's header
	IdleConn       time.Duration // an idle kept-alive connection is closed after this: below the server's own
	Timeouts       []PathTimeout // by path prefix, the longest matching first; the last is the default
	ProbePath      string        // what /readyz asks the checkout API for (HEAD), at most once a second; "/" when empty
	ProbeTimeout   time.Duration
}

// PathTimeout bounds the calls whose path starts with Prefix ("" matches every path).
type PathTimeout struct {
	Prefix   string
	ReadIdle time.Duration // the longest wait for the next byte of the answer, the first included
	Total    time.Duration // the call in all, body included; 0: no bound
}

// Checkout calls the checkout API and streams its answers: Do returns once the answer's header
// is read, and its body is read from the response's BodyStream as it arrives, each read bounded
// by the call's ReadIdle. A request that failed on a reused connection before any byte of its
// answer came back is sent once more, on a fresh connection, when that is safe: when it was
// certainly not sent (the connection was found closed before writing it), or when its method
// is idempotent. A request that failed on a fresh connection is not sent again: the server
// itself had it and gave no answer. It is safe for concurrent use.
type Checkout struct {
	addr     string
	tls      bool
	hc       *fasthttp.HostClient
	probe    *probe
	timeouts []PathTimeout
}

// callKey is the request's user value under which the transport finds its Call.
var callKey = []byte("vouchergate.upstream.call")

// NewCheckout returns the client of the checkout API at addr (host:port), speaking TLS if tls.
func NewCheckout(addr string, tls bool, o CheckoutOptions) *Checkout {
	if o.ProbePath == "" {
		o.ProbePath = "/"
	}
	if len(o.Timeouts) == 0 {
		o.Timeouts = []PathTimeout{{ReadIdle: time.Minute}}
	}
	dial := dialer(o.DialTimeout)
	c := &Checkout{addr: addr, tls: tls, timeouts: o.Timeouts}
	c.hc = &fasthttp.HostClient{
		Addr: addr, IsTLS: tls,
		DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
			nc, err := dial(addr, timeout)
			if err != nil {
				return nil, err
			}
			return &conn{Conn: nc}, nil
		},
		NoDefaultUserAgentHeader:  true,
		MaxConns:                  o.MaxConns,
		MaxConnWaitTimeout:        o.ConnWait,
		MaxIdleConnDuration:       o.IdleConn,
		MaxIdemponentCallAttempts: 2, // one retry, on a fresh connection (retryCheckout)
		RetryIfErr:                retryCheckout,
		ReadBufferSize:            o.MaxHeaderBytes,
		DisablePathNormalizing:    true, // forward the path as the client sent it
		SecureErrorLogMessage:     true,
		Transport:                 streamTransport{},
	}
	c.probe = newProbe(addr, tls, o.ProbePath, o.DialTimeout, o.ProbeTimeout)
	return c
}

// Addr is the checkout API's address.
func (c *Checkout) Addr() string { return c.addr }

// Close closes the idle connections; a call in flight keeps its own until it ends.
func (c *Checkout) Close() {
	c.hc.CloseIdleConnections()
}

// NewCall returns a call bounded by the timeouts of path's longest matching prefix.
func (c *Checkout) NewCall(path []byte, now time.Time) *Call {
	t := c.timeouts[len(c.timeouts)-1]
	for _, pt := range c.timeouts {
		if len(path) >= len(pt.Prefix) && string(path[:len(pt.Prefix)]) == pt.Prefix { // compared, not allocated
			t = pt
			break
		}
	}
	call := &Call{ReadIdle: t.ReadIdle}
	if t.Total > 0 {
		call.Deadline = now.Add(t.Total)
	}
	return call
}

// Do sends req as call and reads the answer's header into resp; its body, if any, streams from
// resp.BodyStream(). Unless Do fails, the caller MUST call call.Release once done with the body.
func (c *Checkout) Do(req *fasthttp.Request, resp *fasthttp.Response, call *Call) error {
	if c.tls {
		req.URI().SetScheme("https")
	} else {
		req.URI().SetScheme("http")
	}
	if len(req.Header.Host()) == 0 {
		req.Header.SetHost(c.addr)
	}
	req.UseHostHeader = true // as Client.Do
	req.SetUserValueBytes(callKey, call)
	defer req.RemoveUserValueBytes(callKey)
	err := c.hc.Do(req, resp)
	if err != nil && call.Aborted() {
		return ErrClientGone
	}
	return err
}

// Probe asks the checkout API for the probe path (HEAD) and returns the status it answered:
// an answer less than a second old is shared (probe).
func (c *Checkout) Probe() (int, error) { return c.probe.ask() }

// retryCheckout decides whether a failed attempt is sent again (fasthttp's RetryIfErr). Only an
// attempt on a reused connection that got no byte of its answer may be: the server may have
// closed the connection as it sat idle, and a fresh one answers. Then it is sent again, once and
// on a fresh connection, when the request was certainly not sent (found stale before writing)
// or its method is idempotent. Never one that failed on a fresh connection (the server had it and
// closed without answering), timed out, was cancelled, or got an answer fasthttp refused.
func retryCheckout(req *fasthttp.Request, attempts int, err error) (resetTimeout, retry bool) {
	call, _ := req.UserValueBytes(callKey).(*Call)
	if call == nil || call.Aborted() || !call.failedReused || call.failedAnswered || attempts > 1 {
		return false, false
	}
	var small *fasthttp.ErrSmallBuffer
	switch {
	case errors.Is(err, ErrStaleConn):
		retry = true
	case TimedOut(err) || errors.As(err, &small) || errors.Is(err, fasthttp.ErrBodyTooLarge):
		retry = false
	default:
		retry = idempotent(req)
	}
	call.fresh = retry
	return false, retry
}

// idempotent reports whether the request's method is idempotent (RFC 9110 §9.2.2).
func idempotent(req *fasthttp.Request) bool {
	h := &req.Header
	return h.IsGet() || h.IsHead() || h.IsPut() || h.IsDelete() || h.IsOptions() || h.IsTrace()
}

// streamTransport sends a checkout call on a connection it holds until the call's Release,
// leaving the answer's body in the connection's reader for the caller to stream.
type streamTransport struct{}

func (streamTransport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (retry bool, err error) {
	call, _ := req.UserValueBytes(callKey).(*Call)
	if call == nil {
		return fasthttp.DefaultTransport.RoundTrip(hc, req, resp)
	}
	if call.Aborted() {
		return false, ErrClientGone
	}
	var wait time.Duration
	if !call.Deadline.IsZero() {
		if wait = time.Until(call.Deadline); wait <= 0 {
			return false, fasthttp.ErrTimeout
		}
	}
	cc, err := hc.AcquireConn(wait, req.ConnectionClose())
	// A retry runs on a connection dialled for it: the kept-alive ones it is handed meanwhile are
	// closed (they are likely as stale as the one that failed, and few).
	for tries := 0; err == nil && call.fresh && tries < 16; tries++ {
		if w := ours(cc.Conn()); w == nil || !w.used {
			break
		}
		hc.CloseConn(cc)
		cc, err = hc.AcquireConn(wait, req.ConnectionClose())
	}
	if err != nil {
		return false, err
	}
	nc := cc.Conn()
	w := ours(nc)
	if w == nil {
		hc.CloseConn(cc)
		return false, errors.New("checkout connection not dialled by the edge")
	}
	call.failedReused = w.used
	w.begin(call)
	fail := func(err error) (bool, error) {
		call.failedAnswered = w.answered
		w.end()
		hc.CloseConn(cc)
		return true, err
	}

	_ = nc.SetWriteDeadline(within(call.ReadIdle, call.Deadline))
	bw := hc.AcquireWriter(nc)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	if err != nil {
		if errors.Is(err, ErrStaleConn) {
			hc.CloseIdleConnections() // idle longer than the server keeps them: the others are next
		}
		return fail(err)
	}

	br := hc.AcquireReader(nc)
	resp.StreamBody = true
	if req.Header.IsHead() {
		resp.SkipBody = true
	}
	if err = resp.ReadLimitBody(br, 0); err != nil {
		hc.ReleaseReader(br)
		return fail(err)
	}
	closeConn := req.ConnectionClose() || resp.ConnectionClose() || resp.StatusCode() == fasthttp.StatusSwitchingProtocols
	call.conn2, call.reader = nc, br
	call.release = func(reuse bool) {
		w.end()
		hc.ReleaseReader(br)
		if reuse && !closeConn {
			hc.ReleaseConn(cc)
		} else {
			hc.CloseConn(cc)
		}
	}
	return false, nil
}
