package voucher_test

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"vouchergate/backend/voucher"
)

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
	rev       int64 // the definition's revision (configure.lua)
	paused    bool
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
	case gv.rev != v.Revision:
		return voucher.GateResult{Outcome: voucher.GateStale, Revision: gv.rev}, nil
	case gv.paused:
		return voucher.GateResult{Outcome: voucher.GatePaused}, nil
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
	gv := &gateVoucher{rev: v.Revision, paused: v.Paused, total: v.TotalLimit, remaining: int64(v.TotalLimit),
		users: map[string]int{}, orders: map[string]voucher.Holder{}}
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

func (g *fakeGate) Peek(ctx context.Context, code, orderID, customerID string) (voucher.GatePeek, error) {
	if err := g.enter("Peek", orderID); err != nil {
		return voucher.GatePeek{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gv, loaded := g.vouchers[code]
	switch {
	case !loaded:
		return voucher.GatePeek{}, nil
	case gv.held(orderID):
		h := gv.orders[orderID]
		return voucher.GatePeek{Loaded: true, Holder: &h}, nil
	}
	return voucher.GatePeek{Loaded: true, Remaining: gv.remaining, CustomerUses: int64(gv.users[customerID])}, nil
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

func (g *fakeGate) Forget(ctx context.Context, code string) (bool, error) {
	if err := g.enter("Forget", ""); err != nil {
		return false, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	_, loaded := g.vouchers[code]
	delete(g.vouchers, code)
	return loaded, nil
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

func (g *fakeGate) Missing(ctx context.Context, code string, rs []voucher.Redemption) ([]voucher.Redemption, error) {
	if err := g.enter("Missing", ""); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gv, loaded := g.vouchers[code]
	var missing []voucher.Redemption
	for _, r := range rs {
		if !loaded || !gv.held(r.OrderID) || gv.orders[r.OrderID].CustomerID != r.CustomerID {
			missing = append(missing, r)
		}
	}
	return missing, nil
}

// PutBack is hold.lua: remaining may go below zero; another customer's take becomes r's.
func (g *fakeGate) PutBack(ctx context.Context, r voucher.Redemption) (bool, error) {
	if err := g.enter("PutBack", r.OrderID); err != nil {
		return false, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gv, loaded := g.vouchers[r.VoucherCode]
	switch {
	case !loaded:
		return false, nil
	case !gv.held(r.OrderID):
		gv.hold(r.OrderID, loadedHolder(r))
	case gv.orders[r.OrderID].CustomerID == r.CustomerID:
		return false, nil
	default:
		gv.give(r.OrderID)
		gv.hold(r.OrderID, loadedHolder(r))
	}
	return true, nil
}

// Configure is configure.lua, for a loaded voucher (the fake keeps no definition of one not
// loaded).
func (g *fakeGate) Configure(ctx context.Context, v voucher.Voucher, mode voucher.ConfigureMode) (voucher.Configured, error) {
	if err := g.enter("Configure", ""); err != nil {
		return voucher.Configured{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gv, loaded := g.vouchers[v.Code]
	if !loaded {
		return voucher.Configured{Applied: true}, nil
	}
	c := voucher.Configured{Loaded: true, HeldRevision: gv.rev, Held: int64(len(gv.orders)), Remaining: gv.remaining}
	switch {
	case mode&voucher.ConfigureForce == 0 && gv.rev >= v.Revision:
		return c, nil
	case mode&voucher.ConfigureChecked != 0 && v.TotalLimit < len(gv.orders):
		c.Refused = true
		return c, nil
	}
	gv.rev, gv.paused, gv.total = v.Revision, v.Paused, v.TotalLimit
	gv.remaining = int64(v.TotalLimit - len(gv.orders))
	c.Applied, c.Remaining = true, gv.remaining
	return c, nil
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
