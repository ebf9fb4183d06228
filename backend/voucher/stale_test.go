package voucher_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"vouchergate/backend/voucher"
	"vouchergate/testkit"
)

// slowStore is the real store with time passing (on the service's clock, without sleeping)
// where a test says: in the first warm-up's read, and before the first write is handed on.
// It records every write that committed after its hold had gone stale.
type slowStore struct {
	voucher.Store
	clock             *testkit.OffsetClock
	warmTakes, writes time.Duration
	staleAfter        time.Duration

	mu        sync.Mutex
	warmed    bool
	wrote     bool
	lateWrite []string
}

func (s *slowStore) ActiveRedemptions(ctx context.Context, code string) ([]voucher.Redemption, error) {
	s.mu.Lock()
	if !s.warmed {
		s.warmed = true
		s.clock.Advance(s.warmTakes)
	}
	s.mu.Unlock()
	return s.Store.ActiveRedemptions(ctx, code)
}

func (s *slowStore) Reserve(ctx context.Context, h voucher.Hold, now time.Time) (voucher.Redemption, error) {
	s.slowFirstWrite()
	r, err := s.Store.Reserve(ctx, h, now)
	if err == nil {
		s.checkLate(h)
	}
	return r, err
}

func (s *slowStore) ReserveMany(ctx context.Context, code string, holds []voucher.Hold) ([]voucher.Written, error) {
	s.slowFirstWrite()
	out, err := s.Store.ReserveMany(ctx, code, holds)
	for i, w := range out {
		if err == nil && w.Err == nil {
			s.checkLate(holds[i])
		}
	}
	return out, err
}

func (s *slowStore) slowFirstWrite() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wrote {
		s.wrote = true
		s.clock.Advance(s.writes)
	}
}

func (s *slowStore) checkLate(h voucher.Hold) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clock.Now().Sub(h.ReservedAt) > s.staleAfter {
		s.lateWrite = append(s.lateWrite, h.OrderID)
	}
}

// A retry takes a hold with no row for stale once it is 2×VG_DB_TIMEOUT old, counted from the
// reservation, and gives its use back. So no write may commit later than that: a write that
// starts late (here after a warm-up slower than VG_DB_TIMEOUT) is not sent at all, rather than
// given VG_DB_TIMEOUT from its start, and its use goes back at once (issue 9, item 4).
func TestAWriteThatStartsLateIsNotSent(t *testing.T) {
	const dbTimeout = 300 * time.Millisecond
	var slow *slowStore
	e := newEnv(t, voucher.Config{DBTimeout: dbTimeout, InFlightWait: 5 * time.Second}, func(st voucher.Store) voucher.Store {
		slow = &slowStore{Store: st, warmTakes: 400 * time.Millisecond, writes: 250 * time.Millisecond, staleAfter: 2 * dbTimeout}
		return slow
	})
	slow.clock = e.clock
	ctx := context.Background()
	v := e.createFlash(t, "LATE", 1, 1)

	// Not loaded: the first reservation warms the voucher up, slowly, after its reservation time.
	_, err := e.svc.Reserve(ctx, voucher.Request{Code: v.Code, CustomerID: "c1", OrderID: "o1", OrderAmount: 100})
	if len(slow.lateWrite) > 0 {
		t.Fatalf("orders %v were written after their hold was stale (a retry may have given the use away)", slow.lateWrite)
	}
	if !errors.Is(err, voucher.ErrUnavailable) {
		t.Fatalf("the late write: %v; want ErrUnavailable (not sent, use given back)", err)
	}
	if remaining, _, err := e.gate.Remaining(ctx, v.Code); err != nil || remaining != 1 {
		t.Errorf("remaining %d (%v) after the unsent write; want its use back", remaining, err)
	}
	// the client's retry is written at once
	if r, err := e.svc.Reserve(ctx, voucher.Request{Code: v.Code, CustomerID: "c1", OrderID: "o1", OrderAmount: 100}); err != nil || r.OrderID != "o1" {
		t.Fatalf("retry: %+v %v", r, err)
	}
}
