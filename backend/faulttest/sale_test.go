package faulttest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
	return reserveVia([]*client{c}, 0, code, a, p)
}

// reserveVia is one client reserving its order under policy p through several front doors
// (the edges of a scaled-out stack): the first request goes to clients[first], each retry to
// the next. A 502 (an edge that could not reach a backend: nothing was sent) is retried like a
// 503.
func reserveVia(clients []*client, first int, code string, a attempt, p policy) outcome {
	o := outcome{attempt: a}
	body := map[string]any{"customerId": a.customer, "orderId": a.order, "orderAmount": orderAmount}
	for try := range p.tries {
		if try > 0 {
			time.Sleep(p.pause/2 + rand.N(p.pause))
		}
		c := clients[(first+try)%len(clients)]
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
		if o.status != 503 && o.status != 502 {
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

func itoa(i int) string { return fmt.Sprint(i) }
