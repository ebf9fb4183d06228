package api_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

// A pause mid-sale on two backends: once PATCH active=false has answered on one, every new
// order (and its reservation's dry run) is refused 422 NOT_ELIGIBLE PAUSED by either, the other's
// copy of the voucher a moment old; granted orders keep their 201 with the same discount, and
// confirm and release still work; active=true resumes, and the sale sells exactly its limit.
// Both paths; the invariants hold after.
func TestPauseAndResumeMidSale(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		cfg := backendtest.Config(t)
		b, other := backendtest.Start(t, cfg), backendtest.Start(t, cfg)
		bs := []*backendtest.Backend{b, other}
		b.CreateVoucher(t, backendtest.Voucher{Code: "PAUSE", Discount: 10, TotalLimit: 150, FlashSale: flash})
		var whilePaused []answer
		var retried map[string]answer
		var confirmed, released string
		var pausedView wire.VoucherView
		s := runSale(t, bs, "PAUSE", "o", 200, 32, 40, func() {
			pausedView = mustEdit(t, b, "PAUSE", map[string]any{"active": false})
			var wg sync.WaitGroup
			var mu sync.Mutex
			for i := range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					order := fmt.Sprintf("paused-%d", i)
					a := reserveAsClient(t, bs[i%2], "PAUSE", "cust-"+order, order, 1000)
					v := reserveAsClient(t, bs[(i+1)%2], "PAUSE", "cust-"+order+"-v", order+"-v", 1000)
					if i%4 == 0 {
						v = validate(t, bs[i%2], "PAUSE", "cust-"+order, order, 1000)
					}
					mu.Lock()
					whilePaused = append(whilePaused, a, v)
					mu.Unlock()
				}()
			}
			wg.Wait()
		})
		// the sale's granted orders, retried while it is paused still (the storm is over)
		retried = map[string]answer{}
		for i, o := range s.granted {
			retried[o] = reserveAsClient(t, bs[i%2], "PAUSE", "cust-"+o, o, 1000)
		}
		if len(s.granted) > 1 {
			confirmed, released = s.granted[0], s.granted[1]
			if st, body := b.Do(t, "POST", "/vouchers/PAUSE/reservations/"+confirmed+"/confirm", nil); st != 200 {
				t.Errorf("confirm while paused: %d %s", st, body)
			}
			if st, body := other.Do(t, "DELETE", "/vouchers/PAUSE/reservations/"+released, nil); st != 200 {
				t.Errorf("release while paused: %d %s", st, body)
			}
		}
		if pausedView.Active || viewOf(t, b, "PAUSE").Active {
			t.Fatalf("the voucher is not paused: %+v", pausedView)
		}
		for _, a := range whilePaused {
			if a.status != 422 || a.code != wire.CodeNotEligible || a.reason != wire.ReasonPaused {
				t.Errorf("a new order while paused: %+v; want 422 NOT_ELIGIBLE PAUSED", a)
			}
		}
		for o, a := range retried {
			if a.status != 201 || a.discount != 10 {
				t.Errorf("retry of granted %s while paused: %+v; want its 201 with 10 off", o, a)
			}
		}
		for code, n := range s.refused {
			if code != wire.CodeOutOfStock && code != wire.CodeNotEligible {
				t.Errorf("%d refused in the storm with %s", n, code)
			}
		}
		granted := s.granted
		if released != "" {
			granted = granted[:0:0]
			for _, o := range s.granted {
				if o != released {
					granted = append(granted, o)
				}
			}
		}
		b.CheckInvariants(t, "PAUSE", granted)

		mustEdit(t, b, "PAUSE", map[string]any{"active": true})
		// The other backend refuses from its copy of the voucher, read again within a second
		// (a grant never comes from an old copy; a refusal may, that long).
		resumed := time.Now()
		for a := validate(t, other, "PAUSE", "cust-probe", "probe", 1000); a.reason == wire.ReasonPaused; a = validate(t, other, "PAUSE", "cust-probe", "probe", 1000) {
			if time.Since(resumed) > 1500*time.Millisecond {
				t.Fatalf("the other backend still refuses as paused %v after the resume", time.Since(resumed))
			}
			time.Sleep(20 * time.Millisecond)
		}
		rest := sellRest(t, other, "PAUSE", "resumed")
		if got := len(granted) + len(rest); got != 150 {
			t.Errorf("%d granted in all (%d before the pause, %d resumed); want exactly 150", got, len(granted), len(rest))
		}
		b.CheckInvariants(t, "PAUSE", append(granted, rest...))
	})
}

// A sale put off after it granted orders: PATCH startsAt to an hour from now (with a new
// discount), then a pause. Granted orders keep their 201 with the discount they were given, on
// either backend, and their dry run says valid; new orders are refused NOT_STARTED, then PAUSED;
// confirm still works. Both paths.
func TestPostponedSaleKeepsGrantedOrders(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		cfg := backendtest.Config(t)
		b, other := backendtest.Start(t, cfg), backendtest.Start(t, cfg)
		b.CreateVoucher(t, backendtest.Voucher{Code: "LATER", Discount: 10, TotalLimit: 10, FlashSale: flash})
		granted := []string{"o1", "o2"}
		for _, o := range granted {
			if a := reserve(t, b, "LATER", "cust-"+o, o, 1000); a.status != 201 {
				t.Fatalf("reserve %s: %+v", o, a)
			}
		}
		if st, body := b.Do(t, "POST", "/vouchers/LATER/reservations/o2/confirm", nil); st != 200 {
			t.Fatalf("confirm o2: %d %s", st, body)
		}
		starts := time.Now().Add(time.Hour).UTC()
		mustEdit(t, b, "LATER", map[string]any{"startsAt": starts.Format(time.RFC3339),
			"endsAt": starts.Add(24 * time.Hour).Format(time.RFC3339), "discountAmount": 40})
		keeps := func(when, wantReason string) {
			t.Helper()
			for i, o := range granted {
				for _, via := range []*backendtest.Backend{b, other} {
					if a := reserve(t, via, "LATER", "cust-"+o, o, 1000); a.status != 201 || a.discount != 10 {
						t.Errorf("retry of granted %s %s: %+v; want its 201 with 10 off", o, when, a)
					}
					if a := validate(t, via, "LATER", "cust-"+o, o, 1000); a.status != 201 || a.discount != 10 {
						t.Errorf("dry run of granted %s %s: %+v; want valid with 10 off", o, when, a)
					}
				}
				order := fmt.Sprintf("new-%s-%d", wantReason, i)
				if a := reserve(t, b, "LATER", "cust-"+order, order, 1000); a.status != 422 || a.reason != wantReason {
					t.Errorf("a new order %s: %+v; want 422 NOT_ELIGIBLE %s", when, a, wantReason)
				}
			}
		}
		keeps("after the start was postponed", wire.ReasonNotStarted)
		mustEdit(t, b, "LATER", map[string]any{"active": false})
		keeps("after the postponed sale was paused", wire.ReasonPaused)
		if st, body := other.Do(t, "POST", "/vouchers/LATER/reservations/o1/confirm", nil); st != 200 {
			t.Errorf("confirm o1 of the postponed sale: %d %s", st, body)
		}
		b.CheckInvariants(t, "LATER", granted)
	})
}
