package api_test

import (
	"strings"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// The backend command, sent requests it cannot read with the admin token in their
// Authorization header (and in a cookie and the query), never writes the token to its output,
// and thousands of them write a bounded number of lines: one per second for each kind of
// report.
func TestMalformedRequestsLogNoSecretAndNoFlood(t *testing.T) {
	p := backendtest.StartProcess(t, backendtest.Config(t))
	reqs := testkit.MalformedRequests(backendtest.Token)
	for _, raw := range reqs {
		if status, body := testkit.RawHTTP(t, p.Addr(), raw); status != 400 {
			t.Errorf("%q: %d %s; want 400", raw, status, body)
		}
	}
	start := time.Now()
	const flood = 2000
	testkit.SendMalformed(t, p.Addr(), reqs, flood, 8)
	elapsed := time.Since(start)
	testkit.Eventually(t, "the backend to log what it could not read", func() bool {
		return strings.Contains(p.Output(), "error when serving connection")
	})

	out := p.Output()
	if i := strings.Index(out, backendtest.Token); i >= 0 {
		t.Errorf("the backend wrote the admin token to its output: %q", out[max(0, i-300):min(len(out), i+100)])
	}
	lines := strings.Count(out, "error when serving connection")
	// one line per second per kind: all these are one kind; 2x for slack at the edges
	if bound := 2 * (int(elapsed/time.Second) + 2); lines > bound {
		t.Errorf("%d malformed requests in %s wrote %d lines (%d bytes of output); want at most %d",
			flood+len(reqs), elapsed.Round(time.Millisecond), lines, len(out), bound)
	}
}
