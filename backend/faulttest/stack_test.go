package faulttest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/keys"
)

// startStack starts the scaled-out stack (issue 15) and a client for each of its edges and for
// its in-process checker (the admin API), and logs how long the stack took to start.
func startStack(t *testing.T) (s *backendtest.Stack, edges []*client, admin *client) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a replicated Redis Cluster, a NATS cluster, two backends and two edges")
	}
	s = backendtest.StartStack(t)
	t.Logf("the stack (6 Redis nodes, 3 NATS nodes, 2 backends, 2 edges) started in %s", s.StartUp.Round(10*time.Millisecond))
	for _, e := range s.Edges {
		edges = append(edges, newClient(t, e.URL()))
	}
	return s, edges, newClient(t, s.Checker.URL)
}

// createSpread creates n flash vouchers of total uses each (perUser per customer) and fails the
// test unless their slots fall on every master of the cluster.
func createSpread(t *testing.T, s *backendtest.Stack, prefix string, n, total, perUser int) []string {
	t.Helper()
	codes := make([]string, n)
	masters := map[string]int{}
	for i := range codes {
		codes[i] = fmt.Sprintf("%s-%03d", prefix, i)
		createFlash(t, s.Checker, codes[i], total, perUser)
		key := keys.ForVoucher(s.Config().RedisPrefix, codes[i]).Remaining
		masters[s.Redis.MasterOf(s.Redis.KeySlot(t, key))]++
	}
	if len(masters) != 3 || masters[""] > 0 {
		t.Fatalf("the vouchers' slots are served by %v; want all three masters", masters)
	}
	t.Logf("%d vouchers over the masters: %v", n, masters)
	return codes
}

// Two hundred flash vouchers, spread over the slots of a replicated Redis Cluster, sell at once
// through two edges, each in front of two backends. Each sells exactly its limit, with no
// reconciliation needed; every 201 is backed by its row (D4) and D1–D3 hold; Redis equals the
// database; and every granted order's retry answers 201 through either edge.
func TestClusterStackSellsManyVouchers(t *testing.T) {
	s, edges, _ := startStack(t)
	const vouchers, total = 200, 10
	codes := createSpread(t, s, "MANY", vouchers, total, 1)

	buyers := startBuyers(edges, codes, 64)
	buyers.waitSoldOut(t, codes, 3*time.Minute)
	buys := buyers.stop()
	t.Logf("%d requests through the two edges", len(buys))

	pool := s.Checker.App.Pool
	grantedVia := map[string]int{} // order -> the edge that granted it
	customerOf := customers(buys.outcomes())
	for _, b := range buys {
		if b.status == 201 {
			grantedVia[b.order] = b.via
		}
	}
	for _, code := range codes {
		granted := checkAnswers(t, pool, code, buys.of(code))
		if n := len(active(rows(t, pool, code))); n != total || len(granted) != total {
			t.Errorf("%s: %d granted, %d active rows; want exactly its limit, %d", code, len(granted), n, total)
		}
		s.Checker.CheckInvariants(t, code, granted)
		checkRedisEqualsDB(t, s.Checker, code)
		for _, order := range granted {
			for _, via := range []int{1 - grantedVia[order], grantedVia[order]} {
				o := edges[via].reserveOrder(code, attempt{customer: customerOf[order], order: order}, patient)
				if o.status != 201 || o.discount != discount {
					t.Errorf("%s: granted order %s retried through edge %d: %d %s", code, order, via, o.status, o.code)
				}
			}
		}
	}
}

// The Redis failover scenario (TestRedisClusterMasterFailoverMidSale) on the stack: the sale
// goes through both edges to both backend processes, and the 503 window is measured where the
// shop sees it, in front of the edges.
func TestClusterStackRedisMasterFailoverMidSale(t *testing.T) {
	s, edges, admin := startStack(t)
	failoverMidSale(t, s.Redis, s.Checker, s.Clock, edges, admin)
}

// A flash sale of thirty vouchers runs through two edges in front of two backends, on a
// replicated Redis Cluster and a NATS cluster. Mid-sale one backend and one edge are SIGKILLed
// at once. Clients send each order's first request to one edge and retry an unanswered one, a
// 502 or a 503 through the other, with the same orderId. The survivors carry on: every order
// gets a definitive answer, and no answered 201 is lost (each is backed by its active row, D4).
// After reconciliation past the grace period D1–D4 hold, Redis equals the database, the rest of
// each voucher sells exactly, and every granted order's retry answers 201 through the surviving
// edge and through the killed one once it is back.
func TestClusterStackBackendAndEdgeKilledMidSale(t *testing.T) {
	s, edges, admin := startStack(t)
	const vouchers, total = 30, 20
	codes := createSpread(t, s, "KILL", vouchers, total, 2)

	// A customer buys one voucher (a second order of theirs asks for the same); an order's
	// first request goes to the edge its number picks.
	attempts := storm("", 2*vouchers*total, 15)
	codeOf := func(a attempt) string { return codes[number(a.customer)%len(codes)] }
	firstOf := func(a attempt) int { return number(a.order) % len(edges) }
	sale := startSale(attempts, 48, func(a attempt) outcome {
		return reserveVia(edges, firstOf(a), codeOf(a), a, patient)
	})
	sale.waitGranted(t, vouchers*total/3)
	sale.running(t, "kill a backend and an edge")
	killedAt := time.Now()
	s.Backends[1].Kill()
	s.Edges[0].Kill()
	outcomes := sale.wait(t)
	t.Logf("killed backend 1 and edge 0 after %d grants; the sale went on %s after: %s",
		vouchers*total/3, time.Since(killedAt).Round(time.Millisecond), tally(outcomes))

	byCode := map[string][]outcome{}
	metKill := 0 // orders with a request that got no answer: in flight on the killed edge
	for _, o := range outcomes {
		if o.lost > 0 {
			metKill++
		}
		if !o.definitive() {
			t.Errorf("order %s: ended %d %s after %d tries (%d unanswered)", o.order, o.status, o.code, o.tries, o.lost)
		}
		byCode[codeOf(o.attempt)] = append(byCode[codeOf(o.attempt)], o)
	}
	if metKill == 0 {
		t.Errorf("no request went unanswered: the kill met no request in flight")
	}
	pool := s.Checker.App.Pool
	granted := map[string][]string{}
	for _, code := range codes {
		waitQuiet(t, pool, s.Checker.App.Redis, s.Config().RedisPrefix, code)
		granted[code] = checkAnswers(t, pool, code, byCode[code])
		checkNoOverAllocation(t, pool, code)
	}

	// Reconciliation past the grace period releases what the dead backend took in Redis but
	// never wrote; then each voucher sells its rest through the surviving backend.
	s.Clock.Advance(s.Config().ReconcileGrace + time.Minute)
	customerOf := customers(outcomes)
	survivor := newClient(t, s.Backends[0].URL())
	s.Edges[0].Start()
	for _, code := range codes {
		reconcile(t, admin, code)
		s.Checker.CheckInvariants(t, code, granted[code])
		checkRedisEqualsDB(t, s.Checker, code)
		prefix := "rest-" + code + "-"
		more := sellRest(t, survivor, pool, code, prefix)
		for _, o := range more {
			customerOf[o] = strings.Replace(o, prefix+"o", prefix+"c", 1)
		}
		granted[code] = append(granted[code], more...)
		s.Checker.CheckInvariants(t, code, granted[code])
		checkRedisEqualsDB(t, s.Checker, code)
		retryGranted(t, edges[1], code, granted[code], customerOf)
		retryGranted(t, edges[0], code, granted[code], customerOf)
	}
}

// number returns the number in a storm's customer or order id ("c12", "o7").
func number(id string) int {
	n, err := strconv.Atoi(id[1:])
	if err != nil {
		panic("not a storm id: " + id)
	}
	return n
}
