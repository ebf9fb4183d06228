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
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"vouchergate/backend/app"
	"vouchergate/backend/backendtest"
	"vouchergate/backend/voucher"
	"vouchergate/shared/config"
	"vouchergate/shared/keys"
	"vouchergate/shared/wire"
)

// Every sale's orders ask for the same amount and get the voucher's whole discount.
const (
	orderAmount = 1000
	discount    = 100
)

// client is a shop's HTTP client for one backend address. Safe for concurrent use.
type client struct {
	hc   *http.Client
	base string // http://127.0.0.1:port
}

func newClient(t testing.TB, base string) *client {
	tr := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{hc: &http.Client{Transport: tr}, base: base}
}

// answer is what one request got back; status 0 when no answer came (refused, reset, timed out).
type answer struct {
	status   int
	code     string // the error code of a 4xx or 5xx
	discount int64  // of a 201
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
	a := answer{status: resp.StatusCode}
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

// attempt is one client's try at reserving an order.
type attempt struct {
	customer, order string
}

// policy says how a client retries its order with the same orderId: on a 503 (as Retry-After
// asks) and, with retryLost, on a request that got no answer; at most tries requests.
type policy struct {
	tries     int
	pause     time.Duration
	timeout   func(try int) time.Duration
	retryLost bool
}

// patient is the shop's usual client: a few retries of a 503 or of a lost request.
var patient = policy{tries: 30, pause: 200 * time.Millisecond, retryLost: true,
	timeout: func(int) time.Duration { return 30 * time.Second }}

// outcome is what one client saw for its order: the last answer, when it sent the request that
// got it and when the answer came, how many requests it made and how many got no answer.
type outcome struct {
	attempt
	answer
	sentAt, answeredAt time.Time
	tries, lost        int
}

// reserveOrder is one client reserving its order under policy p.
func (c *client) reserveOrder(code string, a attempt, p policy) outcome {
	o := outcome{attempt: a}
	body := map[string]any{"customerId": a.customer, "orderId": a.order, "orderAmount": orderAmount}
	for try := range p.tries {
		if try > 0 {
			time.Sleep(p.pause/2 + rand.N(p.pause))
		}
		o.sentAt = time.Now()
		o.answer, _ = c.send("POST", "/vouchers/"+code+"/reservations", body, p.timeout(try))
		o.answeredAt = time.Now()
		o.tries++
		if o.status == 0 {
			o.lost++
			if !p.retryLost {
				break
			}
			continue
		}
		if o.status != 503 {
			break
		}
	}
	return o
}

// storm builds a sale's requests: customers <prefix>c0, <prefix>c1, ..., a fifth of them coming
// back with a second order, and a third of all requests repeating an earlier order (the shop's
// client retrying while the first request is still in flight, or after it was answered).
func storm(prefix string, n int, seed uint64) []attempt {
	rng := rand.New(rand.NewPCG(seed, 42))
	var firsts, all []attempt
	for len(all) < n {
		switch {
		case len(firsts) > 0 && rng.IntN(3) == 0:
			all = append(all, firsts[max(0, len(firsts)-1-rng.IntN(40))]) // a recent order again
		case len(firsts) > 0 && rng.IntN(5) == 0:
			a := attempt{customer: firsts[rng.IntN(len(firsts))].customer, order: fmt.Sprintf("%so%d", prefix, len(firsts))}
			firsts = append(firsts, a)
			all = append(all, a)
		default:
			a := attempt{customer: fmt.Sprintf("%sc%d", prefix, len(firsts)), order: fmt.Sprintf("%so%d", prefix, len(firsts))}
			firsts = append(firsts, a)
			all = append(all, a)
		}
	}
	return all
}

// sale runs a storm of attempts on a bounded set of workers, each attempt a client of its own.
type sale struct {
	outcomes []outcome
	granted  atomic.Int64 // 201s answered so far
	done     chan struct{}

	mu     sync.Mutex
	grants map[string]time.Time // order -> when its first 201 came
}

func startSale(attempts []attempt, workers int, reserve func(attempt) outcome) *sale {
	s := &sale{outcomes: make([]outcome, len(attempts)), done: make(chan struct{}), grants: map[string]time.Time{}}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(attempts) {
					return
				}
				o := reserve(attempts[i])
				s.outcomes[i] = o
				if o.status == 201 {
					s.granted.Add(1)
					s.mu.Lock()
					if _, ok := s.grants[o.order]; !ok {
						s.grants[o.order] = o.answeredAt
					}
					s.mu.Unlock()
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(s.done)
	}()
	return s
}

// waitGranted returns once the sale answered n 201s, and fails the test if the sale ended
// first (the fault would not be mid-sale).
func (s *sale) waitGranted(t *testing.T, n int64) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for s.granted.Load() < n {
		select {
		case <-s.done:
			t.Fatalf("the sale ended after %d grants, before %d: the fault would not be mid-sale", s.granted.Load(), n)
		case <-deadline:
			t.Fatalf("the sale granted %d in 2 minutes, waiting for %d", s.granted.Load(), n)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// grantedBefore returns the orders whose clients had a 201 before at.
func (s *sale) grantedBefore(at time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, when := range s.grants {
		if when.Before(at) {
			ids = append(ids, id)
		}
	}
	return ids
}

// running fails the test unless the sale is still going.
func (s *sale) running(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.done:
		t.Fatalf("%s: the sale had ended; the fault was not mid-sale", what)
	default:
	}
}

// wait returns the outcomes once every client has its last answer (each is bounded).
func (s *sale) wait(t *testing.T) []outcome {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the sale's clients did not finish within 3 minutes")
	}
	return s.outcomes
}

// settle asks again, patiently, for every order none of whose clients got a definitive answer
// (the fault outlasted their retries), and fails the test unless each now gets one.
func settle(t *testing.T, c *client, code string, outcomes []outcome) []outcome {
	t.Helper()
	answered := map[string]bool{}
	for _, o := range outcomes {
		if o.definitive() {
			answered[o.order] = true
		}
	}
	for _, o := range outcomes {
		if answered[o.order] {
			continue
		}
		answered[o.order] = true
		again := c.reserveOrder(code, o.attempt, patient)
		if !again.definitive() {
			t.Errorf("order %s: still %d %s after the fault was over", o.order, again.status, again.code)
		}
		outcomes = append(outcomes, again)
	}
	return outcomes
}

// row is a redemption as the database holds it.
type row struct {
	customer, status string
	discount         int64
}

func (r row) active() bool {
	return r.status == wire.StatusReserved || r.status == wire.StatusConfirmed
}

func rows(t *testing.T, pool *pgxpool.Pool, code string) map[string]row {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := pool.Query(ctx, `SELECT order_id, customer_id, status, discount_amount FROM redemptions WHERE voucher_code = $1`, code)
	if err != nil {
		t.Fatalf("read redemptions of %s: %v", code, err)
	}
	defer res.Close()
	m := map[string]row{}
	for res.Next() {
		var id string
		var r row
		if err := res.Scan(&id, &r.customer, &r.status, &r.discount); err != nil {
			t.Fatalf("read redemptions of %s: %v", code, err)
		}
		m[id] = r
	}
	if err := res.Err(); err != nil {
		t.Fatalf("read redemptions of %s: %v", code, err)
	}
	return m
}

func active(all map[string]row) map[string]row {
	m := map[string]row{}
	for id, r := range all {
		if r.active() {
			m[id] = r
		}
	}
	return m
}

// checkAnswers checks what the clients saw against the database and returns the granted
// orders: every 201 is backed by an active row of its customer with the discount answered
// (D4); an order whose clients were all refused holds no use; a client that sent its request
// after another client of the same order had its 201 got 201 as well; nothing but 201, 409
// and 503 (or no answer) was answered.
func checkAnswers(t *testing.T, pool *pgxpool.Pool, code string, outcomes []outcome) []string {
	t.Helper()
	db := rows(t, pool, code)
	byOrder := map[string][]outcome{}
	for _, o := range outcomes {
		byOrder[o.order] = append(byOrder[o.order], o)
		switch o.status {
		case 0, 201, 409, 503:
		default:
			t.Errorf("order %s: answered %d %s", o.order, o.status, o.code)
		}
	}
	var granted []string
	for order, list := range byOrder {
		var first time.Time
		refused := false
		for _, o := range list {
			switch o.status {
			case 201:
				if first.IsZero() || o.answeredAt.Before(first) {
					first = o.answeredAt
				}
			case 409:
				refused = true
			}
		}
		r, ok := db[order]
		if first.IsZero() {
			if refused && ok && r.active() {
				t.Errorf("order %s: every client was refused, yet it holds a use (%s)", order, r.status)
			}
			continue
		}
		granted = append(granted, order)
		if !ok || !r.active() || r.customer != list[0].customer || r.discount != discount {
			t.Errorf("D4 order %s: answered 201 (discount %d) but the row is %+v (found %v)", order, discount, r, ok)
		}
		for _, o := range list {
			if o.status == 201 && o.discount != discount {
				t.Errorf("order %s: 201 with discount %d; want %d", order, o.discount, discount)
			}
			if o.definitive() && o.status != 201 && o.sentAt.After(first) {
				t.Errorf("order %s: granted at %s, then a retry sent at %s answered %d %s",
					order, first.Format(time.StampMicro), o.sentAt.Format(time.StampMicro), o.status, o.code)
			}
		}
	}
	sort.Strings(granted)
	return granted
}

// gate is a flash voucher's state in Redis.
type gate struct {
	loaded    bool
	remaining int64
	holders   map[string]string // orderId -> "reservedAtMillis:attempt:customerId"
}

func readGate(t *testing.T, rdb redis.UniversalClient, prefix, code string) gate {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k := keys.ForVoucher(prefix, code)
	var g gate
	n, err := rdb.Get(ctx, k.Remaining).Int64()
	switch {
	case err == redis.Nil:
	case err != nil:
		t.Fatalf("read %s remaining: %v", code, err)
	default:
		g.loaded, g.remaining = true, n
	}
	if g.holders, err = rdb.HGetAll(ctx, k.Orders).Result(); err != nil {
		t.Fatalf("read %s orders: %v", code, err)
	}
	return g
}

// attemptOf returns the attempt field of a holder.
func attemptOf(holder string) string {
	_, rest, _ := strings.Cut(holder, ":")
	a, _, _ := strings.Cut(rest, ":")
	return a
}

// hanging returns the orders Redis holds with no active row.
func hanging(g gate, db map[string]row) []string {
	var ids []string
	for id := range g.holders {
		if r, ok := db[id]; !ok || !r.active() {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// checkRedisEqualsDB fails the test unless Redis holds exactly the voucher's active orders and
// total_limit minus them as its uses left.
func checkRedisEqualsDB(t *testing.T, b *backendtest.Backend, code string) {
	t.Helper()
	g := readGate(t, b.App.Redis, b.Config.RedisPrefix, code)
	act := active(rows(t, b.App.Pool, code))
	if !g.loaded {
		t.Errorf("redis equals db %s: the voucher is not loaded", code)
		return
	}
	for id := range act {
		if _, ok := g.holders[id]; !ok {
			t.Errorf("redis equals db %s: active order %s is not in redis", code, id)
		}
	}
	if h := hanging(g, act); len(h) > 0 {
		t.Errorf("redis equals db %s: redis holds %d orders without an active row: %s", code, len(h), brief(h))
	}
	if total := totalLimit(t, b.App.Pool, code); g.remaining != int64(total-len(act)) {
		t.Errorf("redis equals db %s: %d uses left in redis; total_limit %d minus %d active is %d",
			code, g.remaining, total, len(act), total-len(act))
	}
}

func totalLimit(t *testing.T, pool *pgxpool.Pool, code string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT total_limit FROM vouchers WHERE code = $1`, code).Scan(&n); err != nil {
		t.Fatalf("read total_limit of %s: %v", code, err)
	}
	return n
}

// reconcile runs POST /admin/reconcile?code= and returns the voucher's report.
func reconcile(t *testing.T, c *client, code string) voucher.Reconciliation {
	t.Helper()
	a, raw := c.send("POST", "/admin/reconcile?code="+code, nil, time.Minute)
	var body struct {
		Vouchers []voucher.Reconciliation `json:"vouchers"`
	}
	if a.status != 200 || json.Unmarshal(raw, &body) != nil || len(body.Vouchers) != 1 {
		t.Fatalf("reconcile %s: %d %s", code, a.status, raw)
	}
	t.Logf("reconcile %s: %+v", code, body.Vouchers[0])
	return body.Vouchers[0]
}

// sellRest sells the voucher to fresh customers until it answers OUT_OF_STOCK, and fails the
// test unless it sold exactly total_limit minus the active rows it had: no use lost, none sold
// twice. It returns the orders it was granted.
func sellRest(t *testing.T, c *client, pool *pgxpool.Pool, code, prefix string) []string {
	t.Helper()
	total := totalLimit(t, pool, code)
	left := total - len(active(rows(t, pool, code)))
	attempts := make([]attempt, left+30)
	for i := range attempts {
		attempts[i] = attempt{customer: fmt.Sprintf("%sc%d", prefix, i), order: fmt.Sprintf("%so%d", prefix, i)}
	}
	s := startSale(attempts, 16, func(a attempt) outcome { return c.reserveOrder(code, a, patient) })
	var granted []string
	for _, o := range s.wait(t) {
		switch {
		case o.status == 201:
			granted = append(granted, o.order)
		case o.status != 409 || o.code != wire.CodeOutOfStock:
			t.Errorf("selling the rest of %s: order %s answered %d %s", code, o.order, o.status, o.code)
		}
	}
	if len(granted) != left {
		t.Errorf("selling the rest of %s: %d granted; %d uses were left (total_limit %d)", code, len(granted), left, total)
	}
	if n := len(active(rows(t, pool, code))); n != total {
		t.Errorf("after selling the rest of %s: %d active rows; want total_limit %d", code, n, total)
	}
	return granted
}

// retryGranted sends every granted order once more: each must get the same 201.
func retryGranted(t *testing.T, c *client, code string, granted []string, customerOf map[string]string) {
	t.Helper()
	for _, order := range granted {
		o := c.reserveOrder(code, attempt{customer: customerOf[order], order: order}, patient)
		if o.status != 201 || o.discount != discount {
			t.Errorf("granted order %s retried after the sale: %d %s", order, o.status, o.code)
		}
	}
}

func customers(outcomes []outcome) map[string]string {
	m := map[string]string{}
	for _, o := range outcomes {
		m[o.order] = o.customer
	}
	return m
}

// tally counts the outcomes' last answers by status, for the log.
func tally(outcomes []outcome) string {
	n := map[int]int{}
	lost := 0
	for _, o := range outcomes {
		n[o.status]++
		lost += o.lost
	}
	return fmt.Sprintf("201:%d 409:%d 503:%d none:%d (requests without an answer: %d)", n[201], n[409], n[503], n[0], lost)
}

// startBackend runs an in-process backend on backendtest.Config changed by edit, telling time
// from a clock the test advances, and returns it with a client.
func startBackend(t *testing.T, edit func(*config.Backend)) (*backendtest.Backend, *backendtest.Clock, *client) {
	t.Helper()
	cfg := backendtest.Config(t)
	if edit != nil {
		edit(&cfg)
	}
	clock := &backendtest.Clock{}
	b := backendtest.Start(t, cfg, app.WithClock(clock))
	return b, clock, newClient(t, b.URL)
}

// productionBounds puts back the default bounds a retry lives with (backendtest's are generous):
// a hold whose outcome is unknown (its write cut, or its Redis reply lost) is taken for stale
// after 2×DBTimeout, and a retry waits InFlightWait for its first attempt.
func productionBounds(cfg *config.Backend) {
	cfg.DBTimeout, cfg.InFlightWait = 2*time.Second, time.Second
}

// createFlash creates an open flash voucher with the test discount.
func createFlash(t *testing.T, b *backendtest.Backend, code string, total, perUser int) {
	t.Helper()
	b.CreateVoucher(t, backendtest.Voucher{Code: code, Discount: discount, TotalLimit: total,
		PerUserLimit: perUser, FlashSale: true})
}

// checkNoOverAllocation fails the test if the database holds more uses than total_limit.
func checkNoOverAllocation(t *testing.T, pool *pgxpool.Pool, code string) {
	t.Helper()
	if n, total := len(active(rows(t, pool, code))), totalLimit(t, pool, code); n > total {
		t.Errorf("%s: %d active redemptions; total_limit %d", code, n, total)
	}
}

// finish ends a sale on an in-process backend: it reconciles once the grace period has passed
// (advancing the clock), checks D1–D4 and R1–R2 and that Redis equals the database, sells the
// rest of the voucher (exactly its remaining uses), checks again, and retries every granted
// order. It returns the reconciliation's report.
func finish(t *testing.T, b *backendtest.Backend, clock *backendtest.Clock, c *client, code string, granted []string, customerOf map[string]string) voucher.Reconciliation {
	t.Helper()
	clock.Advance(b.Config.ReconcileGrace + time.Minute)
	rep := reconcile(t, c, code)
	b.CheckInvariants(t, code, granted)
	checkRedisEqualsDB(t, b, code)

	more := sellRest(t, c, b.App.Pool, code, "rest-")
	for _, o := range more {
		customerOf[o] = strings.Replace(o, "rest-o", "rest-c", 1)
	}
	granted = append(granted, more...)
	b.CheckInvariants(t, code, granted)
	checkRedisEqualsDB(t, b, code)
	retryGranted(t, c, code, granted, customerOf)
	return rep
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[string]bool, len(a))
	for _, s := range a {
		seen[s] = true
	}
	for _, s := range b {
		if !seen[s] {
			return false
		}
	}
	return true
}

// waitQuiet returns once neither the voucher's rows nor its Redis state have changed for half a
// second (requests the clients abandoned have finished), and fails the test after 30s.
func waitQuiet(t *testing.T, pool *pgxpool.Pool, rdb redis.UniversalClient, prefix, code string) {
	t.Helper()
	snapshot := func() string {
		g := readGate(t, rdb, prefix, code)
		all := rows(t, pool, code)
		return fmt.Sprintf("%d/%d/%d/%d", len(all), len(active(all)), g.remaining, len(g.holders))
	}
	last, since := snapshot(), time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if now := snapshot(); now != last {
			last, since = now, time.Now()
		} else if time.Since(since) > 500*time.Millisecond {
			return
		}
	}
	t.Fatalf("%s still changing 30s after the clients finished", code)
}

func itoa(i int) string { return fmt.Sprint(i) }

// brief lists ids for a message, the first 20 of them.
func brief(ids []string) string {
	if len(ids) > 20 {
		return fmt.Sprintf("%v and %d more", ids[:20], len(ids)-20)
	}
	return fmt.Sprint(ids)
}
