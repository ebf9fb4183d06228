// Package upstream calls the servers behind the edge: the checkout API through a Client, and the
// backends through a Pool that balances them and takes a failing one out until its health check
// passes again. Every call is bounded: dialling, waiting for a free connection, writing and
// reading all end by the call's deadline, and answers are limited in size.
package upstream

import (
	"errors"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// Options bound the calls of a Client.
type Options struct {
	DialTimeout    time.Duration // connecting; the call's deadline applies too
	ConnWait       time.Duration // waiting for a free connection when MaxConns are busy; 0: fail at once
	MaxConns       int           // connections to the server
	MaxHeaderBytes int           // an answer's header
	MaxBodyBytes   int           // an answer's body
	IdleTimeout    time.Duration // an idle kept-alive connection is closed after this
}

// Client calls one server. It is safe for concurrent use.
type Client struct {
	addr string
	tls  bool
	hc   *fasthttp.HostClient
}

// dialError marks a call that failed before its request was written.
type dialError struct{ err error }

func (e *dialError) Error() string { return "dial: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// NewClient returns a Client for the server at addr (host:port), speaking TLS if tls.
func NewClient(addr string, tls bool, o Options) *Client {
	return &Client{addr: addr, tls: tls, hc: &fasthttp.HostClient{
		Addr:                      addr,
		IsTLS:                     tls,
		DialTimeout:               dialer(o.DialTimeout),
		NoDefaultUserAgentHeader:  true,
		MaxConns:                  o.MaxConns,
		MaxConnWaitTimeout:        o.ConnWait,
		MaxIdleConnDuration:       o.IdleTimeout,
		MaxIdemponentCallAttempts: 1, // the Pool decides about retries, knowing the request was not sent
		ReadBufferSize:            o.MaxHeaderBytes,
		MaxResponseBodySize:       o.MaxBodyBytes,
		DisablePathNormalizing:    true, // forward the path as the client sent it
		SecureErrorLogMessage:     true,
	}}
}

// Close closes the client's idle connections; a call in flight keeps its own until it ends.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// dialer connects within the call's remaining time and at most limit, and marks its errors.
func dialer(limit time.Duration) fasthttp.DialFuncWithTimeout {
	return func(addr string, timeout time.Duration) (net.Conn, error) {
		if timeout <= 0 || timeout > limit { // 0: the call has no deadline of its own
			timeout = limit
		}
		conn, err := fasthttp.DialTimeout(addr, timeout)
		if err != nil {
			return nil, &dialError{err: err}
		}
		return conn, nil
	}
}

// Addr is the server's address.
func (c *Client) Addr() string { return c.addr }

// Pending is the number of calls in flight.
func (c *Client) Pending() int { return c.hc.PendingRequests() }

// Do sends req and reads the answer into resp, giving up at deadline. fasthttp bounds the
// call with the connection's read and write deadlines, so a call that times out does not go on
// running behind the caller's back.
func (c *Client) Do(req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	if c.tls {
		req.URI().SetScheme("https")
	} else {
		req.URI().SetScheme("http")
	}
	if len(req.Header.Host()) == 0 {
		req.Header.SetHost(c.addr)
	}
	// Write the Host header as set: without this fasthttp writes the parsed target's host,
	// empty for an HTTP/1.0 request without one, in place of the fallback above.
	req.UseHostHeader = true
	return c.hc.DoDeadline(req, resp, deadline)
}

// NotSent reports whether err means the request was never written: it failed to connect or
// found no free connection. Such a call may go to another server whatever its method.
func NotSent(err error) bool {
	var d *dialError
	return errors.As(err, &d) || errors.Is(err, fasthttp.ErrNoFreeConns)
}

// Refused reports whether err means the server could not be reached at all.
func Refused(err error) bool {
	var d *dialError
	return errors.As(err, &d)
}

// TimedOut reports whether err means the call ran out of time.
func TimedOut(err error) bool {
	if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrDialTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
