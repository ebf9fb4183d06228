package voucher_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
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

// fakeStore is voucher.Store in memory. Like the database it keeps the invariants itself:
// used_count moves only with the active redemptions and never past total_limit, an orderId has
// one redemption ever, a customer holds at most per_user_limit active ones, and a use is taken
// only inside the voucher's period. Its refusals come in the real store's order: closed, out
// of stock, customer at limit (no free slot), order taken.
type fakeStore struct {
	faults
	// hook, when set, runs at the start of every call (outside the lock) with the method's
	// name and the orders it concerns; tests block or change the world there.
	hook func(op string, orders []string)

	mu          sync.Mutex
	vouchers    map[string]*storedVoucher
	redemptions map[string]voucher.Redemption // orderId -> its one redemption
	batches     []int                         // the size of each ReserveMany call
	refused     []error                       // every refusal take answered, in order
}

type storedVoucher struct {
	voucher.Voucher
	used int
}

func newFakeStore() *fakeStore {
	return &fakeStore{vouchers: map[string]*storedVoucher{}, redemptions: map[string]voucher.Redemption{}}
}

// enter runs the hook and returns the fault armed for this call.
func (s *fakeStore) enter(op string, orders ...string) fault {
	if s.hook != nil {
		s.hook(op, orders)
	}
	return s.next(op)
}

func (s *fakeStore) CreateVoucher(ctx context.Context, v voucher.Voucher) error {
	if f := s.enter("CreateVoucher"); f.err != nil {
		return f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.vouchers[v.Code]; ok {
		return voucher.ErrVoucherExists
	}
	s.vouchers[v.Code] = &storedVoucher{Voucher: v}
	return nil
}

func (s *fakeStore) Voucher(ctx context.Context, code string) (voucher.Voucher, error) {
	if f := s.enter("Voucher"); f.err != nil {
		return voucher.Voucher{}, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vouchers[code]
	if !ok {
		return voucher.Voucher{}, voucher.ErrVoucherNotFound
	}
	return v.Voucher, nil
}

func (s *fakeStore) Stats(ctx context.Context, code string) (voucher.Stats, error) {
	if f := s.enter("Stats"); f.err != nil {
		return voucher.Stats{}, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vouchers[code]
	if !ok {
		return voucher.Stats{}, voucher.ErrVoucherNotFound
	}
	st := voucher.Stats{Voucher: v.Voucher, UsedCount: v.used, ByStatus: map[string]int{}}
	for _, r := range s.redemptions {
		if r.VoucherCode == code {
			st.ByStatus[r.Status]++
		}
	}
	return st, nil
}

func (s *fakeStore) Redemption(ctx context.Context, orderID string) (voucher.Redemption, error) {
	if f := s.enter("Redemption", orderID); f.err != nil {
		return voucher.Redemption{}, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.redemptions[orderID]
	if !ok {
		return voucher.Redemption{}, voucher.ErrReservationNotFound
	}
	return r, nil
}

func (s *fakeStore) Lookup(ctx context.Context, code, orderID string) (voucher.Lookup, error) {
	if f := s.enter("Lookup", orderID); f.err != nil {
		return voucher.Lookup{}, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vouchers[code]
	if !ok {
		return voucher.Lookup{}, voucher.ErrVoucherNotFound
	}
	l := voucher.Lookup{SoldOut: v.used >= v.TotalLimit}
	if r, ok := s.redemptions[orderID]; ok {
		l.Existing = &r
	}
	return l, nil
}

func (s *fakeStore) Reserve(ctx context.Context, h voucher.Hold, now time.Time) (voucher.Redemption, error) {
	f := s.enter("Reserve", h.OrderID)
	if f.err != nil && !f.commit {
		return voucher.Redemption{}, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.take(h, now)
	if f.err != nil {
		return voucher.Redemption{}, f.err
	}
	return r, err
}

func (s *fakeStore) ReserveMany(ctx context.Context, code string, holds []voucher.Hold) ([]voucher.Written, error) {
	orders := make([]string, len(holds))
	for i, h := range holds {
		orders[i] = h.OrderID
	}
	f := s.enter("ReserveMany", orders...)
	if f.err != nil && !f.commit {
		return nil, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, len(holds))
	if _, ok := s.vouchers[code]; !ok {
		return nil, voucher.ErrVoucherNotFound
	}
	out := make([]voucher.Written, len(holds))
	for i, h := range holds {
		out[i].Redemption, out[i].Err = s.take(h, h.ReservedAt)
	}
	if f.err != nil {
		return nil, f.err
	}
	return out, nil
}

// take is one guarded reservation, as Reserve's statement makes it. The caller holds s.mu.
func (s *fakeStore) take(h voucher.Hold, now time.Time) (voucher.Redemption, error) {
	r, err := s.decide(h, now)
	if err != nil {
		s.refused = append(s.refused, err)
	}
	return r, err
}

func (s *fakeStore) decide(h voucher.Hold, now time.Time) (voucher.Redemption, error) {
	v, ok := s.vouchers[h.VoucherCode]
	switch {
	case !ok:
		return voucher.Redemption{}, voucher.ErrVoucherNotFound
	case !v.Open(now):
		return voucher.Redemption{}, voucher.ErrNotEligible
	case v.used >= v.TotalLimit:
		return voucher.Redemption{}, voucher.ErrOutOfStock
	case s.activeOf(h.VoucherCode, h.CustomerID) >= v.PerUserLimit:
		return voucher.Redemption{}, voucher.ErrAlreadyUsed
	}
	if _, ok := s.redemptions[h.OrderID]; ok {
		return voucher.Redemption{}, voucher.ErrOrderExists
	}
	r := voucher.Redemption{VoucherCode: h.VoucherCode, CustomerID: h.CustomerID, OrderID: h.OrderID,
		Status: wire.StatusReserved, OrderAmount: h.OrderAmount, DiscountAmount: h.DiscountAmount,
		ReservedAt: h.ReservedAt, HoldExpiresAt: h.ExpiresAt}
	s.redemptions[h.OrderID] = r
	v.used++
	return r, nil
}

// activeOf counts the customer's active redemptions of the voucher. The caller holds s.mu.
func (s *fakeStore) activeOf(code, customer string) int {
	n := 0
	for _, r := range s.redemptions {
		if r.VoucherCode == code && r.CustomerID == customer && r.Active() {
			n++
		}
	}
	return n
}

func (s *fakeStore) Confirm(ctx context.Context, code, orderID string, now time.Time) (voucher.Redemption, error) {
	if f := s.enter("Confirm", orderID); f.err != nil {
		return voucher.Redemption{}, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.redemptionOf(code, orderID)
	switch {
	case err != nil:
		return voucher.Redemption{}, err
	case r.Status == wire.StatusReleased:
		return r, voucher.ErrReleased
	}
	r.Status = wire.StatusConfirmed
	s.redemptions[orderID] = r
	return r, nil
}

func (s *fakeStore) Release(ctx context.Context, code, orderID string, now time.Time) (voucher.Redemption, bool, error) {
	if f := s.enter("Release", orderID); f.err != nil {
		return voucher.Redemption{}, false, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.redemptionOf(code, orderID)
	switch {
	case err != nil:
		return voucher.Redemption{}, false, err
	case r.Status == wire.StatusConfirmed:
		return r, false, voucher.ErrConfirmed
	case r.Status == wire.StatusReleased:
		return r, false, nil
	}
	return s.release(r), true, nil
}

// release releases an active redemption and gives its use back. The caller holds s.mu.
func (s *fakeStore) release(r voucher.Redemption) voucher.Redemption {
	r.Status = wire.StatusReleased
	s.redemptions[r.OrderID] = r
	s.vouchers[r.VoucherCode].used--
	return r
}

// redemptionOf tells an unknown voucher from an unknown reservation. The caller holds s.mu.
func (s *fakeStore) redemptionOf(code, orderID string) (voucher.Redemption, error) {
	if _, ok := s.vouchers[code]; !ok {
		return voucher.Redemption{}, voucher.ErrVoucherNotFound
	}
	r, ok := s.redemptions[orderID]
	if !ok || r.VoucherCode != code {
		return voucher.Redemption{}, voucher.ErrReservationNotFound
	}
	return r, nil
}

func (s *fakeStore) ActiveRedemptions(ctx context.Context, code string) ([]voucher.Redemption, error) {
	if f := s.enter("ActiveRedemptions"); f.err != nil {
		return nil, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active(code), nil
}

// active lists the voucher's active redemptions by orderId. The caller holds s.mu.
func (s *fakeStore) active(code string) []voucher.Redemption {
	var list []voucher.Redemption
	for _, r := range s.redemptions {
		if r.VoucherCode == code && r.Active() {
			list = append(list, r)
		}
	}
	slices.SortFunc(list, func(a, b voucher.Redemption) int { return cmp.Compare(a.OrderID, b.OrderID) })
	return list
}

func (s *fakeStore) ExpireHolds(ctx context.Context, now time.Time, limit int) ([]voucher.Redemption, error) {
	if f := s.enter("ExpireHolds"); f.err != nil {
		return nil, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []voucher.Redemption
	for _, r := range s.redemptions {
		if r.Status == wire.StatusReserved && !r.HoldExpiresAt.After(now) {
			due = append(due, r)
		}
	}
	slices.SortFunc(due, func(a, b voucher.Redemption) int {
		if c := a.HoldExpiresAt.Compare(b.HoldExpiresAt); c != 0 {
			return c
		}
		return cmp.Compare(a.OrderID, b.OrderID)
	})
	released := make([]voucher.Redemption, 0, min(limit, len(due)))
	for _, r := range due[:min(limit, len(due))] {
		released = append(released, s.release(r))
	}
	return released, nil
}

func (s *fakeStore) FlashVouchers(ctx context.Context, since time.Time) ([]voucher.Voucher, error) {
	if f := s.enter("FlashVouchers"); f.err != nil {
		return nil, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var list []voucher.Voucher
	for _, v := range s.vouchers {
		if v.FlashSale && v.EndsAt.After(since) {
			list = append(list, v.Voucher)
		}
	}
	slices.SortFunc(list, func(a, b voucher.Voucher) int { return cmp.Compare(a.Code, b.Code) })
	return list, nil
}

// commit writes h as another attempt or backend would, around the service: no hook runs and no
// fault is taken. It fails the test unless the store takes it (with Errorf: a hook may call it
// from the service's goroutines).
func (s *fakeStore) commit(t testing.TB, h voucher.Hold) voucher.Redemption {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.take(h, h.ReservedAt)
	if err != nil {
		t.Errorf("commit %s/%s: %v", h.VoucherCode, h.OrderID, err)
	}
	return r
}

// row returns the order's redemption, if any, for a test's assertions.
func (s *fakeStore) row(orderID string) (voucher.Redemption, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.redemptions[orderID]
	return r, ok
}

// voucherOf returns the voucher as stored.
func (s *fakeStore) voucherOf(code string) voucher.Voucher {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vouchers[code].Voucher
}

// refusals returns every refusal the store answered, in order.
func (s *fakeStore) refusals() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.refused)
}

// used returns the voucher's used_count.
func (s *fakeStore) used(code string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vouchers[code].used
}

// checkInvariants fails the test unless D1–D3 hold for code, and D4 for the orders granted
// (answered 201 and not released since).
func (s *fakeStore) checkInvariants(t testing.TB, code string, granted []string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vouchers[code]
	active := s.active(code)
	if v.used != len(active) || v.used > v.TotalLimit {
		t.Errorf("D1 %s: used_count %d, active redemptions %d, total_limit %d", code, v.used, len(active), v.TotalLimit)
	}
	perCustomer := map[string]int{}
	for _, r := range active {
		perCustomer[r.CustomerID]++
	}
	for c, n := range perCustomer {
		if n > v.PerUserLimit {
			t.Errorf("D2 %s: customer %s holds %d uses, per_user_limit %d", code, c, n, v.PerUserLimit)
		}
	}
	for id, r := range s.redemptions {
		if r.OrderID != id {
			t.Errorf("D3: redemption of order %s stored under %s", r.OrderID, id)
		}
	}
	for _, id := range granted {
		if r, ok := s.redemptions[id]; !ok || !r.Active() || r.VoucherCode != code {
			t.Errorf("D4 %s: order %s was answered 201 but has no active row (%+v)", code, id, r)
		}
	}
}

// fakeGate is voucher.Gate in memory with the Lua scripts' semantics (lua/*.lua): each call is
// atomic; a holder is kept at the millisecond, as the orders hash stores it. It answers at once
// and ignores ctx; an armed fault stands for Redis not answering in time.
type fakeGate struct {
	faults
	// hook, when set, runs at the start of every call (outside the lock).
	hook func(op, orderID string)

	mu       sync.Mutex
	vouchers map[string]*gateVoucher // loaded vouchers only
}

type gateVoucher struct {
	total     int
	remaining int64
	users     map[string]int            // customer -> uses held
	orders    map[string]voucher.Holder // orderId -> holder
}

func newFakeGate() *fakeGate { return &fakeGate{vouchers: map[string]*gateVoucher{}} }

func (g *fakeGate) enter(op, orderID string) error {
	if g.hook != nil {
		g.hook(op, orderID)
	}
	return g.next(op).err
}

// atMillis is h as the orders hash gives it back.
func atMillis(h voucher.Holder) voucher.Holder {
	h.ReservedAt = time.UnixMilli(h.ReservedAt.UnixMilli())
	return h
}

// Reserve is reserve.lua.
func (g *fakeGate) Reserve(ctx context.Context, v voucher.Voucher, orderID string, h voucher.Holder) (voucher.GateResult, error) {
	if err := g.enter("Reserve", orderID); err != nil {
		return voucher.GateResult{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gv, loaded := g.vouchers[v.Code]
	switch {
	case !loaded:
		return voucher.GateResult{Outcome: voucher.GateNotLoaded}, nil
	case gv.held(orderID):
		return voucher.GateResult{Outcome: voucher.GateHeld, Holder: gv.orders[orderID]}, nil
	case gv.remaining <= 0:
		return voucher.GateResult{Outcome: voucher.GateOutOfStock}, nil
	case gv.users[h.CustomerID] >= v.PerUserLimit:
		return voucher.GateResult{Outcome: voucher.GateAtLimit}, nil
	}
	gv.hold(orderID, atMillis(h))
	return voucher.GateResult{Outcome: voucher.GateReserved, Remaining: gv.remaining}, nil
}

func (gv *gateVoucher) held(orderID string) bool {
	_, ok := gv.orders[orderID]
	return ok
}

// hold takes a use for orderID; give gives it back. Both keep remaining + orders constant.
func (gv *gateVoucher) hold(orderID string, h voucher.Holder) {
	gv.orders[orderID] = h
	gv.users[h.CustomerID]++
	gv.remaining--
}

func (gv *gateVoucher) give(orderID string) {
	h := gv.orders[orderID]
	delete(gv.orders, orderID)
	if gv.users[h.CustomerID]--; gv.users[h.CustomerID] <= 0 {
		delete(gv.users, h.CustomerID)
	}
	gv.remaining++
}

// Release is release.lua.
func (g *fakeGate) Release(ctx context.Context, code, orderID string, expect *voucher.Holder) (bool, int64, error) {
	if err := g.enter("Release", orderID); err != nil {
		return false, 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gv, loaded := g.vouchers[code]
	if !loaded {
		return false, -1, nil
	}
	if !gv.held(orderID) || (expect != nil && !gv.orders[orderID].Same(*expect)) {
		return false, gv.remaining, nil
	}
	gv.give(orderID)
	return true, gv.remaining, nil
}

// Load is load.lua.
func (g *fakeGate) Load(ctx context.Context, v voucher.Voucher, active []voucher.Redemption) (int64, error) {
	if err := g.enter("Load", ""); err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if gv, loaded := g.vouchers[v.Code]; loaded {
		return gv.remaining, nil
	}
	gv := &gateVoucher{total: v.TotalLimit, remaining: int64(v.TotalLimit), users: map[string]int{}, orders: map[string]voucher.Holder{}}
	for _, r := range active {
		gv.hold(r.OrderID, loadedHolder(r))
	}
	gv.remaining = max(gv.remaining, 0)
	g.vouchers[v.Code] = gv
	return gv.remaining, nil
}

// loadedHolder is the holder a load or a put-back stores for an active redemption.
func loadedHolder(r voucher.Redemption) voucher.Holder {
	return atMillis(voucher.Holder{CustomerID: r.CustomerID, ReservedAt: r.ReservedAt, Attempt: "db"})
}

func (g *fakeGate) Holding(ctx context.Context, code, orderID string) (voucher.Holder, bool, error) {
	if err := g.enter("Holding", orderID); err != nil {
		return voucher.Holder{}, false, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if gv, loaded := g.vouchers[code]; loaded && gv.held(orderID) {
		return gv.orders[orderID], true, nil
	}
	return voucher.Holder{}, false, nil
}

func (g *fakeGate) Remaining(ctx context.Context, code string) (int64, bool, error) {
	if err := g.enter("Remaining", ""); err != nil {
		return 0, false, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if gv, loaded := g.vouchers[code]; loaded {
		return gv.remaining, true, nil
	}
	return 0, false, nil
}

func (g *fakeGate) Orders(ctx context.Context, code string) ([]string, error) {
	holders, err := g.Holders(ctx, code)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(holders))
	for id := range holders {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

func (g *fakeGate) Holders(ctx context.Context, code string) (map[string]voucher.Holder, error) {
	if err := g.enter("Holders", ""); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	holders := map[string]voucher.Holder{}
	if gv, loaded := g.vouchers[code]; loaded {
		for id, h := range gv.orders {
			holders[id] = h
		}
	}
	return holders, nil
}

func (g *fakeGate) Missing(ctx context.Context, code string, orderIDs []string) ([]string, error) {
	if err := g.enter("Missing", ""); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gv, loaded := g.vouchers[code]
	var missing []string
	for _, id := range orderIDs {
		if !loaded || !gv.held(id) {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

// PutBack is hold.lua: remaining may go below zero.
func (g *fakeGate) PutBack(ctx context.Context, r voucher.Redemption) (bool, error) {
	if err := g.enter("PutBack", r.OrderID); err != nil {
		return false, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gv, loaded := g.vouchers[r.VoucherCode]
	if !loaded || gv.held(r.OrderID) {
		return false, nil
	}
	gv.hold(r.OrderID, loadedHolder(r))
	return true, nil
}

// Recount is recount.lua.
func (g *fakeGate) Recount(ctx context.Context, v voucher.Voucher) (voucher.Recount, error) {
	if err := g.enter("Recount", ""); err != nil {
		return voucher.Recount{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gv, loaded := g.vouchers[v.Code]
	if !loaded {
		return voucher.Recount{}, nil
	}
	counts := map[string]int{}
	for _, h := range gv.orders {
		counts[h.CustomerID]++
	}
	rc := voucher.Recount{Loaded: true, Before: gv.remaining, After: int64(v.TotalLimit - len(gv.orders)),
		UsersFixed: !maps.Equal(counts, gv.users)}
	gv.users, gv.remaining = counts, rc.After
	return rc, nil
}

// lose makes Redis forget that orderID holds a use, as a failover that lost the take would:
// the order's entry and count go, and its use is left again.
func (g *fakeGate) lose(code, orderID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.vouchers[code].give(orderID)
}

// flush makes Redis lose the voucher, as a restart empty would.
func (g *fakeGate) flush(code string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.vouchers, code)
}

// drift adds d to remaining alone, breaking R1 as only a bug or lost write could.
func (g *fakeGate) drift(code string, d int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.vouchers[code].remaining += d
}

// state returns remaining and whether orderID is held, for a test's assertions.
func (g *fakeGate) state(code, orderID string) (remaining int64, held bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gv, loaded := g.vouchers[code]
	if !loaded {
		return 0, false
	}
	return gv.remaining, gv.held(orderID)
}

// checkR1 fails the test unless R1 holds for a loaded voucher: remaining + held orders =
// total_limit, remaining not below zero, and users agrees with orders.
func (g *fakeGate) checkR1(t testing.TB, code string) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	gv, loaded := g.vouchers[code]
	if !loaded {
		return
	}
	if gv.remaining+int64(len(gv.orders)) != int64(gv.total) || gv.remaining < 0 {
		t.Errorf("R1 %s: remaining %d + orders %d != total_limit %d", code, gv.remaining, len(gv.orders), gv.total)
	}
	counts := map[string]int{}
	for _, h := range gv.orders {
		counts[h.CustomerID]++
	}
	if !maps.Equal(counts, gv.users) {
		t.Errorf("R1 %s: users %v, orders count %v", code, gv.users, counts)
	}
}

// checkR2 fails the test unless every active redemption of code in st holds a use in the gate,
// when the gate has the voucher loaded.
func (g *fakeGate) checkR2(t testing.TB, code string, st *fakeStore) {
	t.Helper()
	st.mu.Lock()
	active := st.active(code)
	st.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	gv, loaded := g.vouchers[code]
	if !loaded {
		return
	}
	for _, r := range active {
		if !gv.held(r.OrderID) {
			t.Errorf("R2 %s: active order %s is not held in the gate", code, r.OrderID)
		}
	}
}

// fakeEnv is a service on the fakes, with the notifications it sent recorded (recorder is
// service_test.go's) and the clock the tests move.
type fakeEnv struct {
	cfg   voucher.Config
	svc   *voucher.Service
	store *fakeStore
	gate  *fakeGate
	note  *recorder
	clock *backendtest.Clock
}

func newFakeEnv(cfg voucher.Config) *fakeEnv {
	f := &fakeEnv{store: newFakeStore(), gate: newFakeGate(), note: &recorder{}, clock: &backendtest.Clock{}}
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
