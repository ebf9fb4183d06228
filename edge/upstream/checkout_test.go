package upstream

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestNewCallTakesTheLongestMatchingPrefix(t *testing.T) {
	c := NewCheckout("127.0.0.1:1", false, CheckoutOptions{Timeouts: []PathTimeout{
		{Prefix: "/api/poll/", ReadIdle: 45 * time.Second},
		{Prefix: "/api/", ReadIdle: 5 * time.Second, Total: time.Minute},
		{ReadIdle: time.Minute},
	}})
	now := time.Now()
	type bounds struct {
		ReadIdle time.Duration
		Deadline time.Time
	}
	for path, want := range map[string]bounds{
		"/api/poll/orders": {45 * time.Second, time.Time{}},
		"/api/cart":        {5 * time.Second, now.Add(time.Minute)},
		"/api":             {time.Minute, time.Time{}},
		"/":                {time.Minute, time.Time{}},
	} {
		got := c.NewCall([]byte(path), now)
		if got.ReadIdle != want.ReadIdle || !got.Deadline.Equal(want.Deadline) {
			t.Errorf("%s: read %v, deadline %v; want %v, %v", path, got.ReadIdle, got.Deadline, want.ReadIdle, want.Deadline)
		}
	}
}

// Only an attempt on a reused connection that got no byte of its answer is sent again: a stale
// one whatever its method, an idempotent one cut; never a POST that may have been read, a
// request that failed on a fresh connection or after part of its answer, a timeout, a
// cancelled call, or a second time.
func TestRetryCheckout(t *testing.T) {
	type attempt struct{ reused, answered, aborted bool }
	for _, tt := range []struct {
		name     string
		method   string
		last     attempt
		attempts int
		err      error
		want     bool
	}{
		{"stale POST", "POST", attempt{reused: true}, 1, ErrStaleConn, true},
		{"stale GET, second time", "GET", attempt{reused: true}, 2, ErrStaleConn, false},
		{"POST cut", "POST", attempt{reused: true}, 1, fasthttp.ErrConnectionClosed, false},
		{"GET cut", "GET", attempt{reused: true}, 1, fasthttp.ErrConnectionClosed, true},
		{"PUT cut", "PUT", attempt{reused: true}, 1, fasthttp.ErrConnectionClosed, true},
		{"GET cut after a byte", "GET", attempt{reused: true, answered: true}, 1, fasthttp.ErrConnectionClosed, false},
		{"GET cut on a fresh connection", "GET", attempt{}, 1, fasthttp.ErrConnectionClosed, false},
		{"GET cut again", "GET", attempt{reused: true}, 2, fasthttp.ErrConnectionClosed, false},
		{"GET timed out", "GET", attempt{reused: true}, 1, fasthttp.ErrTimeout, false},
		{"GET header too large", "GET", attempt{reused: true}, 1, &fasthttp.ErrSmallBuffer{}, false},
		{"cancelled", "GET", attempt{reused: true, aborted: true}, 1, ErrStaleConn, false},
	} {
		req := &fasthttp.Request{}
		req.Header.SetMethod(tt.method)
		call := &Call{failedReused: tt.last.reused, failedAnswered: tt.last.answered}
		if tt.last.aborted {
			call.Abort()
		}
		req.SetUserValueBytes(callKey, call)
		if _, retry := retryCheckout(req, tt.attempts, tt.err); retry != tt.want {
			t.Errorf("%s: retry %v; want %v", tt.name, retry, tt.want)
		}
		if call.fresh != tt.want {
			t.Errorf("%s: next attempt fresh %v; want %v", tt.name, call.fresh, tt.want)
		}
	}
}
