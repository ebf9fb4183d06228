package faulttest

import (
	"testing"
	"time"
)

// impatient clients give up on a request after a tiny timeout that doubles with each try
// (2ms, 4ms, ... 5s): most first requests are abandoned mid-flight, their outcome unknown to
// the client, and sent again with the same orderId.
var impatient = policy{tries: 25, pause: 20 * time.Millisecond, retryLost: true,
	timeout: func(try int) time.Duration { return min(2*time.Millisecond<<try, 5*time.Second) }}

// Clients retry every request they gave up on. Each order ends with exactly one reservation or
// none: every client gets a definitive answer, the answers of one order agree with each other
// and with the database (D4), the abandoned requests leave no use hanging (before any repair
// Redis equals the database and the voucher sold exactly total_limit), and every granted
// order's retry, patient or impatient, gets its 201 again.
func TestClientsRetryAfterTimeouts(t *testing.T) {
	b, clock, c := startBackend(t, nil)
	const code, total = "TIMEOUTS", 120
	createFlash(t, b, code, total, 2)

	s := startSale(storm("", 400, 6), 64, func(a attempt) outcome { return c.reserveOrder(code, a, impatient) })
	outcomes := s.wait(t)
	t.Logf("%s", tally(outcomes))
	unknownThenGranted := 0
	for _, o := range outcomes {
		if !o.definitive() {
			t.Errorf("order %s: no definitive answer after %d tries: %d %s", o.order, o.tries, o.status, o.code)
		}
		if o.status == 201 && o.lost > 0 {
			unknownThenGranted++
		}
	}
	if unknownThenGranted == 0 {
		t.Fatalf("no granted order had a request abandoned first: the timeouts did not cut requests mid-flight")
	}
	t.Logf("granted orders whose client had abandoned a request first: %d", unknownThenGranted)

	waitQuiet(t, b.App.Pool, b.App.Redis, b.Config.RedisPrefix, code)
	granted := checkAnswers(t, b.App.Pool, code, outcomes)
	if len(granted) != total {
		t.Errorf("%d orders granted; the sale should sell exactly %d", len(granted), total)
	}
	b.CheckInvariants(t, code, granted)
	checkRedisEqualsDB(t, b, code)

	customerOf := customers(outcomes)
	for _, order := range granted {
		if o := c.reserveOrder(code, attempt{customer: customerOf[order], order: order}, impatient); o.status != 201 || o.discount != discount {
			t.Errorf("granted order %s retried impatiently: %d %s", order, o.status, o.code)
		}
	}
	if rep := finish(t, b, clock, c, code, granted, customerOf); len(rep.Released) > 0 {
		t.Errorf("reconciliation released %s: abandoned requests left uses hanging", brief(rep.Released))
	}
}
