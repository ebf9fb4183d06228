package faulttest

import (
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/backend/app"
	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// Two backends sell one flash voucher at once, each group-committing its winners, with retries
// of the same orders landing on either backend. Their batches serialize on the voucher's row:
// every 201 is backed by a row, nothing is sold twice, and Redis equals the database, for a
// per-customer limit of 1 and of 2.
func TestGroupCommitOnTwoBackends(t *testing.T) {
	for _, perUser := range []int{1, 2} {
		t.Run("per customer "+itoa(perUser), func(t *testing.T) {
			cfg := backendtest.Config(t)
			cfg.DBTimeout, cfg.InFlightWait = 2*time.Second, time.Second
			clock := &testkit.OffsetClock{}
			b1 := backendtest.Start(t, cfg, app.WithClock(clock))
			b2 := backendtest.Start(t, cfg, app.WithClock(clock))
			clients := []*client{newClient(t, b1.URL), newClient(t, b2.URL)}
			const code, total = "TWO", 300
			createFlash(t, b1, code, total, perUser)

			var turn atomic.Int64
			s := startSale(storm("", 1200, uint64(perUser)), 64, func(a attempt) outcome {
				return clients[turn.Add(1)%2].reserveOrder(code, a, patient)
			})
			outcomes := settle(t, clients[0], code, s.wait(t))
			t.Logf("%s", tally(outcomes))
			granted := checkAnswers(t, b1.App.Pool, code, outcomes)
			if len(granted) != total {
				t.Errorf("%d orders granted; want the whole %d", len(granted), total)
			}
			b1.CheckInvariants(t, code, granted)
			batches, holds := int64(0), int64(0)
			for _, b := range []*backendtest.Backend{b1, b2} {
				n, h := b.App.Vouchers.WriteBatches()
				batches, holds = batches+n, holds+h
			}
			t.Logf("%d holds written in %d batches", holds, batches)
			if holds <= batches {
				t.Errorf("%d holds in %d batches: the winners were never written together", holds, batches)
			}
			finish(t, b1, clock, clients[1], code, granted, customers(outcomes))
		})
	}
}

// An operator closes the voucher in the database while its sale runs. The backend still has it
// open in its cache, so the gate keeps admitting winners, but their batches read the end under
// the row lock and refuse them: each is answered 422 NOT_ELIGIBLE, gives its use back to Redis,
// and its batch's neighbours written before the close keep theirs.
func TestVoucherClosedMidSale(t *testing.T) {
	b, _, c := startBackend(t, nil)
	const code, total = "CLOSING", 300
	createFlash(t, b, code, total, 2)
	s := startSale(storm("", 900, 5), 48, func(a attempt) outcome { return c.reserveOrder(code, a, patient) })
	s.waitGranted(t, total/3)
	s.running(t, "close the voucher")
	closeMidSale(t, b.App.Pool, code)
	outcomes := s.wait(t)
	t.Logf("%s", tally(outcomes))
	var decided []outcome
	closed := map[string]bool{}
	refusals := 0 // 422 answers, retries of an order included
	for _, o := range outcomes {
		if o.status == 422 && o.code == wire.CodeNotEligible {
			closed[o.order] = true
			refusals++
			continue
		}
		decided = append(decided, o)
	}
	if len(closed) == 0 {
		t.Fatal("no order was refused as not eligible after the voucher closed")
	}
	// Each refusal the database gave a gate winner is a compensating release, counted: at most
	// one per 422 answered (a 422 given before the gate, once the cache has the end, takes no
	// use and gives none back).
	m := testkit.ScrapeMetrics(t, b.OpsURL+"/metrics")
	if m.Has("vouchergate_compensations_total", "result", "failed") {
		t.Errorf("compensating releases failed: %v", m.Value(t, "vouchergate_compensations_total", "result", "failed"))
	}
	if !m.Has("vouchergate_compensations_total", "result", "released") {
		t.Errorf("%d reservations refused after the close, and no compensating release counted", refusals)
	} else if n := m.Value(t, "vouchergate_compensations_total", "result", "released"); n < 1 || n > float64(refusals) {
		t.Errorf("vouchergate_compensations_total{result=released} = %v; want 1 to %d (the 422s after the close)", n, refusals)
	}
	granted := checkAnswers(t, b.App.Pool, code, decided)
	db := rows(t, b.App.Pool, code)
	for order := range closed {
		if r, ok := db[order]; ok && r.active() && !contains(granted, order) {
			t.Errorf("order %s was answered 422 yet holds a use", order)
		}
	}
	waitQuiet(t, b.App.Pool, b.App.Redis, b.Config.RedisPrefix, code)
	if held := hanging(backendtest.ReadGate(t, b.App.Redis, b.Config.RedisPrefix, code), db); len(held) > 0 {
		t.Errorf("uses held in redis without a row after the refusals: %s", brief(held))
	}
	b.CheckInvariants(t, code, granted)
}

// A batch's COMMIT reaches PostgreSQL, which commits, and the answer is lost (the connection is
// cut). The writer cannot know the outcome; each of its winners reads its row back and is
// answered from it, no use is given back for a row that exists, and the sale goes on.
func TestBatchCommitCutMidSale(t *testing.T) {
	var proxy *testkit.CutProxy
	b, clock, c := startBackend(t, func(cfg *config.Backend) {
		proxy = testkit.StartCutProxy(t, "127.0.0.1:5432")
		cfg.DatabaseURL = proxy.URL(cfg.DatabaseURL)
	})
	const code, total = "CUT", 300
	createFlash(t, b, code, total, 1)
	s := startSale(storm("", 900, 7), 48, func(a attempt) outcome { return c.reserveOrder(code, a, patient) })
	s.waitGranted(t, total/3)
	s.running(t, "cut a commit")
	proxy.CutOnce("commit")
	select {
	case <-proxy.Settled():
	case <-time.After(time.Minute):
		t.Fatal("no commit was cut within a minute")
	}
	outcomes := settle(t, c, code, s.wait(t))
	t.Logf("%s", tally(outcomes))
	granted := checkAnswers(t, b.App.Pool, code, outcomes)
	b.CheckRedis(t, code)
	if held := hanging(backendtest.ReadGate(t, b.App.Redis, b.Config.RedisPrefix, code), rows(t, b.App.Pool, code)); len(held) > 0 {
		t.Errorf("uses held in redis without a row after the cut commit: %s", brief(held))
	}
	finish(t, b, clock, c, code, granted, customers(outcomes))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
