package api_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest"
	"vouchergate/backend/voucher"
	"vouchergate/shared/keys"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// watchRemaining reads a flash voucher's uses left in Redis until stop is closed and returns
// the least it saw: an edit must never take it below 0.
func watchRemaining(t *testing.T, b *backendtest.Backend, code string, stop <-chan struct{}) *atomic.Int64 {
	least := &atomic.Int64{}
	least.Store(1 << 62)
	key := keys.ForVoucher(b.Config.RedisPrefix, code).Remaining
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := b.App.Redis.Get(context.Background(), key).Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Errorf("read remaining: %v", err)
				return
			}
			if err == nil && n < least.Load() {
				least.Store(n)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	return least
}

// A limit raised mid-sale: the storm of 600 new orders sells exactly the new limit (the 100
// new uses at once, on either path), and afterwards the database and Redis agree (D1–D4,
// R1–R2, the gate holding the new definition).
func TestLimitRaisedMidSale(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		b.CreateVoucher(t, backendtest.Voucher{Code: "RAISE", Discount: 10, TotalLimit: 100, FlashSale: flash})
		var raised wire.VoucherView
		s := runSale(t, []*backendtest.Backend{b}, "RAISE", "o", 600, 48, 40, func() {
			raised = mustEdit(t, b, "RAISE", map[string]any{"totalLimit": 200})
		})
		rest := sellRest(t, b, "RAISE", "late")
		if raised.TotalLimit != 200 || raised.Revision != 2 {
			t.Errorf("the raise answered %+v; want totalLimit 200 at revision 2", raised)
		}
		if got := len(s.granted) + len(rest); got != 200 {
			t.Errorf("%d orders granted (%d in the storm, %d after); want exactly the new limit, 200", got, len(s.granted), len(rest))
		}
		for code, n := range s.refused {
			if code != wire.CodeOutOfStock {
				t.Errorf("%d refused with %s", n, code)
			}
		}
		v := viewOf(t, b, "RAISE")
		if v.UsedCount != 200 || (flash && (v.RedisRemaining == nil || *v.RedisRemaining != 0)) {
			t.Errorf("after the sale: used %d, redis remaining %v; want 200 and 0", v.UsedCount, v.RedisRemaining)
		}
		b.CheckInvariants(t, "RAISE", append(s.granted, rest...))
	})
}

// A limit lowered mid-sale: never below what is used (409 LIMIT_BELOW_USED, nothing changed),
// never over-allocated, and the flash gate's remaining never below 0; the sale then sells
// exactly the lowered limit.
func TestLimitLoweredMidSale(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		b.CreateVoucher(t, backendtest.Voucher{Code: "LOWER", Discount: 10, TotalLimit: 300, FlashSale: flash})
		b.Do(t, "POST", "/admin/vouchers/LOWER/warmup", nil)
		stop := make(chan struct{})
		var least *atomic.Int64
		if flash {
			least = watchRemaining(t, b, "LOWER", stop)
		}
		var lowered wire.VoucherView
		var belowUsed, retried int
		s := runSale(t, []*backendtest.Backend{b}, "LOWER", "o", 900, 48, 60, func() {
			// below what is used: refused, whatever the moment
			if status, _, code := edit(t, b, "LOWER", map[string]any{"totalLimit": 1}); status != 409 || code != wire.CodeLimitBelowUsed {
				t.Errorf("lower to 1 mid-sale: %d %s; want 409 %s", status, code, wire.CodeLimitBelowUsed)
			} else {
				belowUsed++
			}
			// just above what is used as read a moment ago: taken unless the sale passed it
			for {
				target := viewOf(t, b, "LOWER").UsedCount + 40
				status, v, code := edit(t, b, "LOWER", map[string]any{"totalLimit": target})
				if status == 200 {
					lowered = v
					return
				}
				if status != 409 || code != wire.CodeLimitBelowUsed {
					t.Errorf("lower to %d mid-sale: %d %s", target, status, code)
					return
				}
				retried++
			}
		})
		rest := sellRest(t, b, "LOWER", "late")
		close(stop)
		t.Logf("lowered to %d (%d tries refused as below used)", lowered.TotalLimit, retried)
		v := viewOf(t, b, "LOWER")
		if lowered.TotalLimit == 0 || v.TotalLimit != lowered.TotalLimit || v.Revision != 2 {
			t.Fatalf("after the sale the voucher is %+v; the lower answered %+v (one edit, revision 2)", v, lowered)
		}
		if got := len(s.granted) + len(rest); got != lowered.TotalLimit || v.UsedCount != got {
			t.Errorf("%d orders granted, used %d; want exactly the lowered limit %d", got, v.UsedCount, lowered.TotalLimit)
		}
		if flash && least.Load() < 0 {
			t.Errorf("redis remaining went down to %d", least.Load())
		}
		if belowUsed != 1 {
			t.Errorf("the lower below used was not refused")
		}
		b.CheckInvariants(t, "LOWER", append(s.granted, rest...))
	})
}

// perUserLimit lowered below what a customer holds keeps their holds (confirm works) and
// refuses more until they hold fewer than the new limit; raised, it gives more slots.
func TestPerUserLimitChangedKeepsHolds(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		b.CreateVoucher(t, backendtest.Voucher{Code: "PER", Discount: 10, TotalLimit: 20, PerUserLimit: 3, FlashSale: flash})
		expect := aliceReserving(t, b, "PER")
		for _, o := range []string{"a1", "a2", "a3"} {
			expect(o, 201, "")
		}
		mustEdit(t, b, "PER", map[string]any{"perUserLimit": 1})
		expect("a4", 409, wire.CodeAlreadyUsed)
		for _, o := range []string{"a1", "a2", "a3"} {
			expect(o, 201, "") // her holds are hers
		}
		if st, body := b.Do(t, "POST", "/vouchers/PER/reservations/a1/confirm", nil); st != 200 {
			t.Fatalf("confirm a hold kept above the lowered limit: %d %s", st, body)
		}
		b.CheckInvariants(t, "PER", []string{"a1", "a2", "a3"})
		// releasing one leaves two, still not below the limit of 1
		b.Do(t, "DELETE", "/vouchers/PER/reservations/a2", nil)
		expect("a5", 409, wire.CodeAlreadyUsed)
		b.Do(t, "DELETE", "/vouchers/PER/reservations/a3", nil)
		expect("a6", 409, wire.CodeAlreadyUsed) // a1 is the one she may hold
		mustEdit(t, b, "PER", map[string]any{"perUserLimit": 2})
		expect("a7", 201, "")
		expect("a8", 409, wire.CodeAlreadyUsed)
		if a := reserve(t, b, "PER", "bob", "b1", 100); a.status != 201 {
			t.Fatalf("another customer: %+v", a)
		}
		b.CheckInvariants(t, "PER", []string{"a1", "a7", "b1"})
	})
}

// A lowered perUserLimit refuses more by counting the customer's active rows, not only by
// looking for a free slot: with a limit of 3 she holds a1–a3 and releases a1, so slot 1 is free
// when the limit is lowered to 1; a new order is refused ALREADY_USED, and so is its dry run. On
// the flash path the gate refuses it first; with her count lost from the gate (Redis lost a
// write), the database's write refuses it and the gate's use is given back. Both paths.
func TestPerUserLimitLoweredWithALowSlotFree(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		b.CreateVoucher(t, backendtest.Voucher{Code: "SLOT", Discount: 10, TotalLimit: 20, PerUserLimit: 3, FlashSale: flash})
		expect := aliceReserving(t, b, "SLOT")
		for _, o := range []string{"a1", "a2", "a3"} {
			expect(o, 201, "")
		}
		if st, body := b.Do(t, "DELETE", "/vouchers/SLOT/reservations/a1", nil); st != 200 {
			t.Fatalf("release a1: %d %s", st, body)
		}
		mustEdit(t, b, "SLOT", map[string]any{"perUserLimit": 1})
		if a := validate(t, b, "SLOT", "alice", "a4", 100); a.status != 409 || a.code != wire.CodeAlreadyUsed {
			t.Errorf("dry run of a new order with slot 1 free and 2 held of 1: %+v; want ALREADY_USED", a)
		}
		expect("a4", 409, wire.CodeAlreadyUsed)
		if flash {
			k := keys.ForVoucher(b.Config.RedisPrefix, "SLOT")
			if err := b.App.Redis.HDel(context.Background(), k.Users, "alice").Err(); err != nil {
				t.Fatal(err)
			}
			expect("a5", 409, wire.CodeAlreadyUsed)
			if g := readRedis(t, b, "SLOT"); g.Remaining != 18 || len(g.Orders) != 2 {
				t.Errorf("the gate after the database refused a5: remaining %d, orders %v; want 18 and a2, a3", g.Remaining, g.Orders)
			}
			b.Do(t, "POST", "/admin/reconcile?code=SLOT", nil) // her count, rebuilt from the orders
		}
		b.CheckInvariants(t, "SLOT", []string{"a2", "a3"})
		b.Do(t, "DELETE", "/vouchers/SLOT/reservations/a2", nil)
		expect("a6", 409, wire.CodeAlreadyUsed) // a3 is the one she may hold
		b.Do(t, "DELETE", "/vouchers/SLOT/reservations/a3", nil)
		expect("a7", 201, "")
		b.CheckInvariants(t, "SLOT", []string{"a7"})
	})
}

// A customer holding more than a lowered perUserLimit, written under the old one, is within
// D2; a row written past the limit it was written under is not, though she holds no more than
// the highest limit of her rows (the check must not take the highest).
func TestInvariantsCatchAnOverGrantAfterALoweredLimit(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	b.CreateVoucher(t, backendtest.Voucher{Code: "OVER", Discount: 10, TotalLimit: 20, PerUserLimit: 3})
	for _, o := range []string{"a1", "a2", "a3"} {
		if a := reserve(t, b, "OVER", "alice", o, 100); a.status != 201 {
			t.Fatalf("reserve %s: %+v", o, a)
		}
	}
	b.Do(t, "DELETE", "/vouchers/OVER/reservations/a1", nil)
	mustEdit(t, b, "OVER", map[string]any{"perUserLimit": 1})
	check := func(t testing.TB) { b.CheckInvariants(t, "OVER", nil) }
	if f := testkit.Failed(t, check); len(f) != 0 {
		t.Fatalf("holds kept above a lowered limit: %v; want none", f)
	}
	// the over-grant the guarded writes refuse: slot 1 written for her under the limit of 1
	exec(t, b, `WITH take AS (UPDATE vouchers SET used_count = used_count + 1 WHERE code = 'OVER' RETURNING code, per_user_limit)
		INSERT INTO redemptions (voucher_code, per_user_limit, customer_id, order_id, slot, status, order_amount,
			discount_amount, reserved_at, hold_expires_at)
		SELECT code, per_user_limit, 'alice', 'a4', 1, 'RESERVED', 100, 10, now(), now() + interval '15 minutes' FROM take`)
	f := testkit.Failed(t, check)
	if len(f) != 1 || !strings.HasPrefix(f[0], "D2 OVER: 1 active redemptions (such as a4)") {
		t.Errorf("the invariants after an over-grant: %q; want D2 naming a4", f)
	}
}

// aliceReserving returns a check that alice's reservation of an order of code is answered
// with a status and an error code ("" for none).
func aliceReserving(t *testing.T, b *backendtest.Backend, code string) func(order string, wantStatus int, wantCode string) {
	return func(order string, wantStatus int, wantCode string) {
		t.Helper()
		if a := reserve(t, b, code, "alice", order, 100); a.status != wantStatus || a.code != wantCode {
			t.Fatalf("alice reserving %s: %+v; want %d %s", order, a, wantStatus, wantCode)
		}
	}
}

// Customers racing past a lowered perUserLimit: each holds what they held before, and no
// more, on either path.
func TestPerUserLimitLoweredUnderConcurrentReservations(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		b.CreateVoucher(t, backendtest.Voucher{Code: "PERC", Discount: 10, TotalLimit: 1000, PerUserLimit: 4, FlashSale: flash})
		const customers, orders = 20, 12
		for c := range customers {
			for o := range 2 {
				order := "pre-" + itoa(c) + "-" + itoa(o)
				if a := reserve(t, b, "PERC", "c"+itoa(c), order, 100); a.status != 201 {
					t.Fatalf("%s: %+v", order, a)
				}
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var granted []string
		start := make(chan struct{})
		for c := range customers {
			for o := range orders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					order := "new-" + itoa(c) + "-" + itoa(o)
					if a := reserveAsClient(t, b, "PERC", "c"+itoa(c), order, 100); a.status == 201 {
						mu.Lock()
						granted = append(granted, order)
						mu.Unlock()
					}
				}()
			}
		}
		close(start)
		mustEdit(t, b, "PERC", map[string]any{"perUserLimit": 1})
		wg.Wait()
		// none may take another now; D2 below: none holds more than the limit its rows were
		// written under
		for c := range customers {
			if a := reserve(t, b, "PERC", "c"+itoa(c), "late-"+itoa(c), 100); a.status != 409 || a.code != wire.CodeAlreadyUsed {
				t.Errorf("c%d after the lower: %+v; want ALREADY_USED", c, a)
			}
		}
		b.CheckInvariants(t, "PERC", granted)
	})
}

// A flash voucher's limit is never lowered below the uses its gate holds, those of orders still
// being written included (their rows not yet committed): the edit is refused 409
// LIMIT_BELOW_USED and changes nothing, so remaining never goes below 0.
func TestLowerCountsOrdersBeingWritten(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	b.CreateVoucher(t, backendtest.Voucher{Code: "INFLIGHT", Discount: 10, TotalLimit: 10, FlashSale: true})
	v, err := b.App.Vouchers.Stats(context.Background(), "INFLIGHT")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // winners whose writes have not committed yet
		h := voucher.Holder{CustomerID: "w" + itoa(i), ReservedAt: time.Now(), Attempt: "inflight" + itoa(i)}
		if res, err := b.App.Gate.Reserve(context.Background(), v.Voucher, "w-"+itoa(i), h); err != nil || res.Outcome != voucher.GateReserved {
			t.Fatalf("take a use in flight: %+v %v", res, err)
		}
	}
	if st, _, code := edit(t, b, "INFLIGHT", map[string]any{"totalLimit": 3}); st != 409 || code != wire.CodeLimitBelowUsed {
		t.Errorf("lower below the uses being written: %d %s; want 409 %s", st, code, wire.CodeLimitBelowUsed)
	}
	g := readRedis(t, b, "INFLIGHT")
	if g.Remaining != 5 || g.Definition["total"] != "10" || viewOf(t, b, "INFLIGHT").Revision != 1 {
		t.Errorf("the refused edit changed something: redis %+v", g)
	}
	if v := mustEdit(t, b, "INFLIGHT", map[string]any{"totalLimit": 5}); v.RedisRemaining == nil || *v.RedisRemaining != 0 {
		t.Errorf("lowered to the uses held: %+v; want 0 left", v)
	}
}
