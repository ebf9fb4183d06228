// Package faulttest runs concurrent flash sales against real servers on free 127.0.0.1 ports
// and breaks something mid-sale: Redis lost or restarted, PostgreSQL stopped, a backend
// SIGKILLed, NATS away, holds expiring under confirms, clients abandoning requests. Each test
// then reconciles and checks DESIGN.md's invariants (D1–D4, R1–R2) from both stores, that
// every 201 a client saw is backed by an active row, and that Redis equals the database.
package faulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// Every sale's orders ask for the same amount and get the voucher's whole discount.
const (
	orderAmount = 1000
	discount    = 100
)

// client is a shop's HTTP client for one backend address. Safe for concurrent use.
type client struct {
	hc          *http.Client
	base        string       // http://127.0.0.1:port
	unavailable atomic.Int64 // 503s answered so far: a fault test waits for its clients to meet the fault
}

// waitUnavailable returns once the client has been answered n more 503s than it had at
// before: its requests met the fault.
func (c *client) waitUnavailable(t *testing.T, before int64, n int64, what string) {
	t.Helper()
	testkit.Eventually(t, what, func() bool { return c.unavailable.Load() >= before+n })
}

func newClient(t testing.TB, base string) *client {
	tr := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{hc: &http.Client{Transport: recorded(t, tr)}, base: base}
}

// answer is what one request got back; status 0 when no answer came (refused, reset, timed out).
type answer struct {
	status     int
	code       string // the error code of a 4xx or 5xx
	discount   int64  // of a 201
	retryAfter string // the Retry-After header
}

func (a answer) definitive() bool { return a.status == 201 || a.status == 409 }

// send makes one request with a JSON body (nil for none) and gives up after timeout. Admin
// paths get the test token.
func (c *client) send(method, path string, body any, timeout time.Duration) (answer, []byte) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			panic(err)
		}
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(path, "/admin/") {
		req.Header.Set("Authorization", "Bearer "+backendtest.Token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{}, nil
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, nil
	}
	a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if a.status == 503 {
		c.unavailable.Add(1)
	}
	if a.status >= 400 {
		var e wire.Error
		_ = json.Unmarshal(raw, &e)
		a.code = e.Error
	} else if a.status == 201 {
		var r wire.ReserveResponse
		if json.Unmarshal(raw, &r) == nil {
			a.discount = r.DiscountAmount
		}
	}
	return a, raw
}

// confirm confirms an order, retrying a 503 or a lost request a few times.
func (c *client) confirm(code, order string) answer {
	var a answer
	for try := range patient.tries {
		if try > 0 {
			time.Sleep(patient.pause)
		}
		if a, _ = c.send("POST", "/vouchers/"+code+"/reservations/"+order+"/confirm", nil, 30*time.Second); a.status != 0 && a.status != 503 {
			break
		}
	}
	return a
}
