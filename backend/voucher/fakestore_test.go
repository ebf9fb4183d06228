package voucher_test

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

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
	v.Revision = 1 // as the database's default: 1 as created
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

func (s *fakeStore) Stats(ctx context.Context, code string) (voucher.Usage, error) {
	if f := s.enter("Stats"); f.err != nil {
		return voucher.Usage{}, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vouchers[code]
	if !ok {
		return voucher.Usage{}, voucher.ErrVoucherNotFound
	}
	st := voucher.Usage{Voucher: v.Voucher, UsedCount: v.used, ByStatus: map[string]int{}}
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
	return s.lookup(code, orderID, "")
}

func (s *fakeStore) LookupCustomer(ctx context.Context, code, orderID, customerID string) (voucher.Lookup, error) {
	if f := s.enter("LookupCustomer", orderID); f.err != nil {
		return voucher.Lookup{}, f.err
	}
	return s.lookup(code, orderID, customerID)
}

// lookup is Lookup's answer, with the customer's active uses counted when customerID is set.
func (s *fakeStore) lookup(code, orderID, customerID string) (voucher.Lookup, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vouchers[code]
	if !ok {
		return voucher.Lookup{}, voucher.ErrVoucherNotFound
	}
	l := voucher.Lookup{SoldOut: v.used >= v.TotalLimit, Revision: v.Revision}
	if r, ok := s.redemptions[orderID]; ok {
		l.Existing = &r
	}
	if customerID == "" {
		return l, nil
	}
	for _, r := range s.redemptions {
		if r.VoucherCode == code && r.CustomerID == customerID && r.Active() {
			l.CustomerUses++
		}
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
	case v.Paused:
		return voucher.Redemption{}, voucher.ErrPaused
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
	case r.Status == wire.StatusRefunded:
		return r, voucher.ErrRefunded
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

func (s *fakeStore) Refund(ctx context.Context, code, orderID string, now time.Time) (voucher.Redemption, bool, error) {
	if f := s.enter("Refund", orderID); f.err != nil {
		return voucher.Redemption{}, false, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.redemptionOf(code, orderID)
	switch {
	case err != nil:
		return voucher.Redemption{}, false, err
	case r.Status == wire.StatusReserved:
		return r, false, voucher.ErrNotConfirmed
	case r.Status == wire.StatusReleased:
		return r, false, voucher.ErrReleased
	case r.Status == wire.StatusRefunded:
		return r, false, nil
	}
	r.Status = wire.StatusRefunded
	s.redemptions[orderID] = r
	s.vouchers[code].used--
	return r, true, nil
}

// EditVoucher holds s.mu throughout, as the row lock holds every writer of the voucher off.
func (s *fakeStore) EditVoucher(ctx context.Context, code string, at time.Time, edit func(voucher.Voucher, int) (voucher.Voucher, error),
	hold func(context.Context, voucher.Voucher, voucher.Voucher) error) (voucher.Voucher, voucher.Voucher, error) {
	if f := s.enter("EditVoucher"); f.err != nil {
		return voucher.Voucher{}, voucher.Voucher{}, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vouchers[code]
	if !ok {
		return voucher.Voucher{}, voucher.Voucher{}, voucher.ErrVoucherNotFound
	}
	before := v.Voucher
	after, err := edit(before, v.used)
	if err != nil {
		return before, before, err
	}
	if _, now := voucher.Diff(before, after); len(now) == 0 {
		return before, before, nil
	}
	after.Revision = before.Revision + 1
	after.Opened = before.Opened || !at.Before(before.StartsAt)
	if err := hold(ctx, before, after); err != nil {
		return before, before, err
	}
	v.Voucher = after
	return before, after, nil
}

func (s *fakeStore) WithVoucher(ctx context.Context, code string, fn func(context.Context, voucher.Voucher) error) error {
	v, err := s.Voucher(ctx, code)
	if err != nil {
		return err
	}
	return fn(ctx, v)
}

func (s *fakeStore) DeleteVoucher(ctx context.Context, code string) error {
	if f := s.enter("DeleteVoucher"); f.err != nil {
		return f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.vouchers[code]; !ok {
		return voucher.ErrVoucherNotFound
	}
	for _, r := range s.redemptions {
		if r.VoucherCode == code {
			return voucher.ErrVoucherInUse
		}
	}
	delete(s.vouchers, code)
	return nil
}

func (s *fakeStore) ShopperOrders(ctx context.Context, code, orderID string, limit int) ([]voucher.Redemption, error) {
	if f := s.enter("ShopperOrders", orderID); f.err != nil {
		return nil, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []voucher.Redemption
	for id, r := range s.redemptions {
		if r.VoucherCode == code && strings.Contains(id, "/") && wire.ClientOrderID(id) == orderID {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b voucher.Redemption) int {
		rank := func(r voucher.Redemption) int {
			if r.Active() {
				return 0
			}
			return 1
		}
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a.OrderID, b.OrderID))
	})
	return out[:min(limit, len(out))], nil
}
