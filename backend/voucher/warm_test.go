package voucher_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/backend/voucher"
)

// racingStore is the real store with two pauses a test controls: the write of order "o1" waits
// for commitO1 (and tells o1Waiting), the write of "o2" waits for releaseO2 (and tells
// o2Waiting), and once armed, the next read of active redemptions lets o1's write commit right
// after it has read, before returning: the warm-up reads the database just before o1 commits.
type racingStore struct {
	voucher.Store
	armed                 chan struct{}
	commitO1, o1Committed chan struct{}
	o1Waiting, o2Waiting  chan struct{}
	releaseO2             chan struct{}
}

func (s *racingStore) ActiveRedemptions(ctx context.Context, code string) ([]voucher.Redemption, error) {
	rs, err := s.Store.ActiveRedemptions(ctx, code)
	select {
	case <-s.armed:
		s.armed = make(chan struct{}) // once
		close(s.commitO1)
		<-s.o1Committed
	default:
	}
	return rs, err
}

func (s *racingStore) pause(orders []string) func() {
	for _, o := range orders {
		switch o {
		case "o1":
			close(s.o1Waiting)
			<-s.commitO1
			return func() { close(s.o1Committed) }
		case "o2":
			close(s.o2Waiting)
			<-s.releaseO2
		}
	}
	return func() {}
}

func (s *racingStore) Reserve(ctx context.Context, h voucher.Hold, now time.Time) (voucher.Redemption, error) {
	done := s.pause([]string{h.OrderID})
	defer done()
	return s.Store.Reserve(ctx, h, now)
}

func (s *racingStore) ReserveMany(ctx context.Context, code string, holds []voucher.Hold) ([]voucher.Written, error) {
	orders := make([]string, len(holds))
	for i, h := range holds {
		orders[i] = h.OrderID
	}
	done := s.pause(orders)
	defer done()
	return s.Store.ReserveMany(ctx, code, holds)
}

// Redis restarts empty while o1's write is in flight; o2's request loads the voucher again from
// the database, whose read comes just before o1 commits, so the load leaves o1 out and o2 takes
// the one use again. o1 was answered 201: its retry must get 201 again, and Redis must hold o1
// (R2), whatever o2's write (refused by the database) is still doing (issue 9, item 1).
func TestWarmUpRacingAWriteKeepsTheGrantedOrder(t *testing.T) {
	var rs *racingStore
	e := newEnv(t, voucher.Config{InFlightWait: 5 * time.Second}, func(st voucher.Store) voucher.Store {
		rs = &racingStore{Store: st, armed: make(chan struct{}), commitO1: make(chan struct{}),
			o1Committed: make(chan struct{}), o1Waiting: make(chan struct{}), o2Waiting: make(chan struct{}),
			releaseO2: make(chan struct{})}
		return rs
	})
	ctx := context.Background()
	v := e.createFlash(t, "RACE", 1, 1)
	if err := e.svc.Warm(ctx, v.Code); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		r   voucher.Redemption
		err error
	}
	reserve := func(customer, order string) chan answer {
		c := make(chan answer, 1)
		go func() {
			r, err := e.svc.Reserve(ctx, voucher.Request{Code: v.Code, CustomerID: customer, OrderID: order, OrderAmount: 100})
			c <- answer{r, err}
		}()
		return c
	}

	first := reserve("c1", "o1")
	<-rs.o1Waiting // o1 holds the use in Redis; its write waits
	k := e.keys(v.Code)
	if err := e.rdb.Del(ctx, k.Remaining, k.Users, k.Orders, k.Version).Err(); err != nil { // Redis restarts empty
		t.Fatal(err)
	}
	close(rs.armed)
	second := reserve("c2", "o2")
	if a := <-first; a.err != nil {
		t.Fatalf("o1's first attempt: %v; want 201", a.err)
	}
	var o2Answer *answer
	select {
	case <-rs.o2Waiting: // o2 took the use again; its write waits
	case a := <-second:
		o2Answer = &a
	}

	if r, err := e.svc.Reserve(ctx, voucher.Request{Code: v.Code, CustomerID: "c1", OrderID: "o1", OrderAmount: 100}); err != nil || r.OrderID != "o1" {
		t.Errorf("o1's retry after it was granted: %+v %v; want the same 201", r, err)
	}
	if _, held, err := e.gate.Holding(ctx, v.Code, "o1"); err != nil || !held {
		t.Errorf("R2: granted o1 is not held in redis (%v)", err)
	}
	close(rs.releaseO2)
	if o2Answer == nil {
		a := <-second
		o2Answer = &a
	}
	if o2Answer.err == nil {
		t.Errorf("o2 was granted the use o1 holds")
	}
	remaining, _, _ := e.gate.Remaining(ctx, v.Code)
	held, _ := e.rdb.HLen(ctx, k.Orders).Result()
	if remaining+held != 1 || remaining < 0 {
		t.Errorf("R1: remaining %d + orders %d; want 1", remaining, held)
	}
}

// releasingStore is the real store whose next read of active redemptions, once armed, releases
// order before returning: the release commits between the warm-up's read and its load.
type releasingStore struct {
	voucher.Store
	armed   atomic.Bool
	release func()
}

func (s *releasingStore) ActiveRedemptions(ctx context.Context, code string) ([]voucher.Redemption, error) {
	rs, err := s.Store.ActiveRedemptions(ctx, code)
	if s.armed.CompareAndSwap(true, false) {
		s.release()
	}
	return rs, err
}

// Redis loses a flash voucher holding o-1; the warm-up reads o-1 as active, then o-1 is
// released (its gate step finds the voucher not loaded and gives nothing back), then the load
// writes o-1 in. The warm-up must give that use back: no order is left held with no row.
func TestWarmUpGivesBackAnOrderReleasedBetweenItsReadAndItsLoad(t *testing.T) {
	var rs *releasingStore
	var e *env
	e = newEnv(t, voucher.Config{}, func(st voucher.Store) voucher.Store {
		rs = &releasingStore{Store: st, release: func() {
			if _, err := e.svc.Release(context.Background(), "WARMREL", "o-1"); err != nil {
				t.Error(err)
			}
		}}
		return rs
	})
	ctx := context.Background()
	v := e.createFlash(t, "WARMREL", 3, 1)
	if err := e.svc.Warm(ctx, v.Code); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Reserve(ctx, request(v.Code, "c-1", "o-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.gate.Forget(ctx, v.Code); err != nil { // Redis lost the voucher
		t.Fatal(err)
	}
	rs.armed.Store(true)
	if err := e.svc.Warm(ctx, v.Code); err != nil {
		t.Fatal(err)
	}
	if r, err := e.store.Redemption(ctx, "o-1"); err != nil || r.Status != "RELEASED" {
		t.Fatalf("o-1: %+v %v; want it released during the warm-up", r, err)
	}
	checkHeldAsWritten(t, e, v.Code)
	if r, err := e.svc.Reserve(ctx, request(v.Code, "c-2", "o-2")); err != nil {
		t.Errorf("a new order after the warm-up: %+v %v; want 201", r, err)
	}
}
