package voucher_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"vouchergate/backend/voucher"
	"vouchergate/testkit"
)

// Failures the fakes can be told to return.
var (
	// errRefused is a write the store certainly did not commit (the server refused it).
	errRefused = fmt.Errorf("server refused the statement: %w", voucher.ErrNotWritten)
	// errCut is a write whose outcome is unknown: the connection broke at COMMIT.
	errCut = errors.New("connection cut while the commit was awaited")
	// errTimeout is a store or Redis that did not answer in time.
	errTimeout = fmt.Errorf("no answer in time: %w", context.DeadlineExceeded)
)

// fault is a failure armed for one call of a fake's method.
type fault struct {
	err    error
	commit bool // a write commits before err is returned (its outcome is unknown to the caller)
}

// faults hands out the failures armed for each method, one per call, in the order armed.
type faults struct {
	mu    sync.Mutex
	armed map[string][]fault
}

func (f *faults) arm(op string, ft fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armed == nil {
		f.armed = map[string][]fault{}
	}
	f.armed[op] = append(f.armed[op], ft)
}

func (f *faults) next(op string) fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.armed[op]
	if len(q) == 0 {
		return fault{}
	}
	f.armed[op] = q[1:]
	return q[0]
}

// fakeEnv is a service on the fakes, with the notifications it sent recorded (recorder is
// service_test.go's) and the clock the tests move.
type fakeEnv struct {
	cfg   voucher.Config
	svc   *voucher.Service
	store *fakeStore
	gate  *fakeGate
	note  *recorder
	clock *testkit.OffsetClock
}

func newFakeEnv(cfg voucher.Config) *fakeEnv {
	f := &fakeEnv{store: newFakeStore(), gate: newFakeGate(), note: &recorder{}, clock: &testkit.OffsetClock{}}
	cfg.Clock = f.clock
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	f.cfg = cfg
	f.svc = voucher.NewService(f.store, f.gate, f.note, cfg)
	return f
}

// create stores a voucher open from an hour ago for a day, as the test shapes it (nil: as is).
func (f *fakeEnv) create(t testing.TB, code string, total, perUser int, flash bool, shape ...func(*voucher.Voucher)) voucher.Voucher {
	t.Helper()
	now := f.clock.Now()
	v := voucher.Voucher{Code: code, DiscountAmount: 30, MinOrderAmount: 50, TotalLimit: total, PerUserLimit: perUser,
		StartsAt: now.Add(-time.Hour), EndsAt: now.Add(24 * time.Hour), FlashSale: flash}
	for _, s := range shape {
		if s != nil {
			s(&v)
		}
	}
	if err := f.store.CreateVoucher(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	return v
}

// warm loads a flash voucher into the gate.
func (f *fakeEnv) warm(t testing.TB, code string) {
	t.Helper()
	if err := f.svc.Warm(context.Background(), code); err != nil {
		t.Fatal(err)
	}
}

// commit writes the customer's order of 100 now as another attempt or backend would, straight
// into the store.
func (f *fakeEnv) commit(t testing.TB, code, customer, order string) voucher.Redemption {
	t.Helper()
	now := f.clock.Now()
	ttl := or(f.cfg.HoldTTL, 15*time.Minute)
	return f.store.commit(t, voucher.Hold{VoucherCode: code, CustomerID: customer, OrderID: order, OrderAmount: 100,
		DiscountAmount: 30, ReservedAt: now, ExpiresAt: now.Add(ttl)})
}

// reserve asks for a use of code for the customer's order of 100.
func (f *fakeEnv) reserve(code, customer, order string) (voucher.Redemption, error) {
	return f.svc.Reserve(context.Background(), voucher.Request{Code: code, CustomerID: customer, OrderID: order, OrderAmount: 100})
}

// mustReserve reserves and fails the test unless it was granted.
func (f *fakeEnv) mustReserve(t testing.TB, code, customer, order string) voucher.Redemption {
	t.Helper()
	r, err := f.reserve(code, customer, order)
	if err != nil || r.OrderID != order {
		t.Fatalf("reserve %s for %s: %+v %v; want 201", order, customer, r, err)
	}
	return r
}

// hang takes a use in the gate for the customer's order as an attempt that then died would:
// no row follows. It returns the holder.
func (f *fakeEnv) hang(t testing.TB, code, customer, order string) voucher.Holder {
	t.Helper()
	h := voucher.Holder{CustomerID: customer, ReservedAt: f.clock.Now(), Attempt: "dead"}
	res, err := f.gate.Reserve(context.Background(), f.store.voucherOf(code), order, h)
	if err != nil || res.Outcome != voucher.GateReserved {
		t.Errorf("hanging take of %s/%s: %+v %v", code, order, res, err)
	}
	return h
}

// check fails the test unless D1–D4 hold in the store and R1–R2 in the gate for code.
func (f *fakeEnv) check(t testing.TB, code string, granted ...string) {
	t.Helper()
	f.store.checkInvariants(t, code, granted)
	f.gate.checkR1(t, code)
	f.gate.checkR2(t, code, f.store)
}

// or is v, or otherwise when v is zero.
func or[T comparable](v, otherwise T) T {
	var zero T
	if v == zero {
		return otherwise
	}
	return v
}
