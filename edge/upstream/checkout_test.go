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

// A stale connection, and an idempotent request losing its connection, are sent again; a POST
// that may have been read, a timeout, a cancelled call are not.
func TestRetryCheckout(t *testing.T) {
	post, get := &fasthttp.Request{}, &fasthttp.Request{}
	post.Header.SetMethod("POST")
	get.Header.SetMethod("GET")
	aborted := &fasthttp.Request{}
	aborted.Header.SetMethod("GET")
	call := &Call{}
	call.Abort()
	aborted.SetUserValueBytes(callKey, call)
	for _, tt := range []struct {
		name     string
		req      *fasthttp.Request
		attempts int
		err      error
		want     bool
	}{
		{"stale POST", post, 1, ErrStaleConn, true},
		{"stale GET, second time", get, 2, ErrStaleConn, true},
		{"POST cut", post, 1, fasthttp.ErrConnectionClosed, false},
		{"GET cut", get, 1, fasthttp.ErrConnectionClosed, true},
		{"GET cut again", get, 2, fasthttp.ErrConnectionClosed, false},
		{"GET timed out", get, 1, fasthttp.ErrTimeout, false},
		{"GET header too large", get, 1, &fasthttp.ErrSmallBuffer{}, false},
		{"cancelled", aborted, 1, ErrStaleConn, false},
	} {
		if _, retry := retryCheckout(tt.req, tt.attempts, tt.err); retry != tt.want {
			t.Errorf("%s: retry %v; want %v", tt.name, retry, tt.want)
		}
	}
}
