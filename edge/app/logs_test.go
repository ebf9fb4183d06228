package app_test

import (
	"strings"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// The edge command, sent requests it cannot read with a client's bearer token and cookie in
// them, never writes them to its output, and thousands of them write a bounded number of lines:
// one per second for each kind of report. So on its public port, and on its ops port.
func TestMalformedRequestsLogNoSecretAndNoFlood(t *testing.T) {
	cfg := backendtest.Config(t)
	b := backendtest.Start(t, cfg)
	ops := freeAddr(t)
	e := startEdgeProcess(t, "VG_EDGE_BACKENDS="+b.Addr, "VG_NATS_URL="+cfg.NATSURL, "VG_NATS_PREFIX="+cfg.NATSPrefix,
		"VG_EDGE_OPS_ADDR="+ops)
	for _, port := range []struct{ name, addr string }{{"public", e.Addr}, {"ops", ops}} {
		t.Run(port.name, func(t *testing.T) {
			malformedLogNoSecretAndNoFlood(t, port.addr, func() string { return e.output(t) })
		})
	}
}

func malformedLogNoSecretAndNoFlood(t *testing.T, addr string, output func() string) {
	secret := "client-secret-5d81-" + t.Name()
	before := strings.Count(output(), "error when serving connection")
	reqs := testkit.MalformedRequests(secret)
	for _, raw := range reqs {
		if status, body := testkit.RawHTTP(t, addr, raw); status != 400 {
			t.Errorf("%q: %d %s; want 400", raw, status, body)
		}
	}
	start := time.Now()
	const flood = 2000
	testkit.SendMalformed(t, addr, reqs, flood, 8)
	elapsed := time.Since(start)
	testkit.Eventually(t, "the edge to log what it could not read", func() bool {
		return strings.Count(output(), "error when serving connection") > before
	})

	out := output()
	if i := strings.Index(out, secret); i >= 0 {
		t.Errorf("the edge wrote the client's secret to its output: %q", out[max(0, i-300):min(len(out), i+100)])
	}
	lines := strings.Count(out, "error when serving connection") - before
	// one line per second per kind: all these are one kind; 2x for slack at the edges
	if bound := 2 * (int(elapsed/time.Second) + 2); lines > bound {
		t.Errorf("%d malformed requests in %s wrote %d lines (%d bytes of output); want at most %d",
			flood+len(reqs), elapsed.Round(time.Millisecond), lines, len(out), bound)
	}
}
