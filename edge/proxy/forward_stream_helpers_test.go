package proxy

import (
	"testing"
	"time"

	"vouchergate/edge/upstream"
)

// newTestCheckout is the checkout client of a test edge: o as given, with what it leaves unset
// taken from the edge's defaults scaled to a test (a read timeout of timeout).
func newTestCheckout(t testing.TB, addr string, timeout time.Duration, o upstream.CheckoutOptions) *upstream.Checkout {
	if o.DialTimeout == 0 {
		o.DialTimeout = 300 * time.Millisecond
	}
	if o.ConnWait == 0 {
		o.ConnWait = 100 * time.Millisecond
	}
	if o.MaxConns == 0 {
		o.MaxConns = 64
	}
	if o.MaxHeaderBytes == 0 {
		o.MaxHeaderBytes = 64 << 10
	}
	if o.IdleConn == 0 {
		o.IdleConn = 2 * time.Second
	}
	if len(o.Timeouts) == 0 {
		o.Timeouts = []upstream.PathTimeout{{ReadIdle: timeout}}
	}
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = 300 * time.Millisecond
	}
	c := upstream.NewCheckout(addr, false, o)
	t.Cleanup(c.Close)
	return c
}
