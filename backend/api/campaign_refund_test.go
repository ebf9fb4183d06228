package api_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

// refund sends POST .../refund and returns the status and the status or error code answered.
func refund(t *testing.T, b *backendtest.Backend, code, order string) (int, string) {
	t.Helper()
	status, body := b.Do(t, "POST", "/vouchers/"+code+"/reservations/"+order+"/refund", nil)
	if status == 200 {
		var r wire.ReservationStatus
		if err := json.Unmarshal(body, &r); err != nil || r.OrderID != order {
			t.Errorf("refund %s: 200 %s", order, body)
		}
		return status, r.Status
	}
	var e wire.Error
	_ = json.Unmarshal(body, &e)
	return status, e.Error
}

// Refunds racing reservations and each other on two backends: 40 confirmed orders are each
// refunded 4 times, alternating backends, while 240 new orders storm both. Every refund answers
// 200 REFUNDED, each use comes back exactly once (the sale then sells exactly the 40 uses
// refunded, used_count is the active rows, Redis's remaining + held = the limit), and each
// refunded customer's slot is free again. What every client was told is checked against the
// voucher model (history): no refund's use given twice, no refunded order granted again.
func TestRefundsRacingReservationsOnTwoBackends(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		cfg := backendtest.Config(t)
		b1, b2 := backendtest.Start(t, cfg), backendtest.Start(t, cfg)
		bs := []*backendtest.Backend{b1, b2}
		refunded := backendtest.Voucher{Code: "REFUND", Discount: 10, TotalLimit: 40, FlashSale: flash}
		b1.CreateVoucher(t, refunded)
		recordSale(t, refunded, b1, b2)
		first := runSale(t, bs, "REFUND", "paid", 40, 8, 0, nil)
		if len(first.granted) != 40 {
			t.Fatalf("%d of 40 granted before the refunds", len(first.granted))
		}
		for i, o := range first.granted {
			if st, body := bs[i%2].Do(t, "POST", "/vouchers/REFUND/reservations/"+o+"/confirm", nil); st != 200 {
				t.Fatalf("confirm %s: %d %s", o, st, body)
			}
		}

		var wg sync.WaitGroup
		var mu sync.Mutex
		var refunds []string
		start := make(chan struct{})
		for i, o := range first.granted {
			for try := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					st, status := refund(t, bs[(i+try)%2], "REFUND", o)
					mu.Lock()
					refunds = append(refunds, fmt.Sprintf("%d %s", st, status))
					mu.Unlock()
				}()
			}
		}
		var storm *sale
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			storm = runSale(t, bs, "REFUND", "new", 240, 24, 0, nil)
		}()
		close(start)
		wg.Wait()

		for _, r := range refunds {
			if r != "200 "+wire.StatusRefunded {
				t.Errorf("a refund answered %s; want 200 REFUNDED", r)
			}
		}
		rest := sellRest(t, b2, "REFUND", "late")
		if got := len(storm.granted) + len(rest); got != 40 {
			t.Errorf("%d new orders granted after 40 refunds (%d in the storm, %d after); want exactly 40", got, len(storm.granted), len(rest))
		}
		v := viewOf(t, b1, "REFUND")
		if v.Counts[wire.StatusRefunded] != 40 || v.UsedCount != 40 {
			t.Errorf("after the refunds: %+v; want 40 REFUNDED and 40 used", v)
		}
		granted := append(storm.granted, rest...)
		b1.CheckInvariants(t, "REFUND", granted)

		// a refunded customer's slot is free: with a use back, they may reserve again
		if st, body := b1.Do(t, "DELETE", "/vouchers/REFUND/reservations/"+granted[0], nil); st != 200 {
			t.Fatalf("release %s: %d %s", granted[0], st, body)
		}
		if a := reserve(t, b2, "REFUND", "cust-"+first.granted[0], "again", 1000); a.status != 201 {
			t.Errorf("the refunded customer reserving a new order: %+v; want 201", a)
		}
		b1.CheckInvariants(t, "REFUND", append(granted[1:], "again"))
	})
}

// A refund is of a confirmed order only: a reserved one is 409 RESERVATION_NOT_CONFIRMED (and
// stays reserved), a released one 409 RESERVATION_RELEASED; a refunded one is refunded again
// with the same answer, and is then neither confirmed, released nor reserved again.
func TestRefundAnswers(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		b.CreateVoucher(t, backendtest.Voucher{Code: "RF", Discount: 10, TotalLimit: 5, FlashSale: flash})
		for _, o := range []string{"held", "gone", "paid"} {
			if a := reserve(t, b, "RF", "c-"+o, o, 100); a.status != 201 {
				t.Fatalf("reserve %s: %+v", o, a)
			}
		}
		b.Do(t, "DELETE", "/vouchers/RF/reservations/gone", nil)
		b.Do(t, "POST", "/vouchers/RF/reservations/paid/confirm", nil)
		for _, c := range []struct {
			method, path string
			status       int
			code         string
		}{
			{"POST", "held/refund", 409, wire.CodeNotConfirmed},
			{"POST", "gone/refund", 409, wire.CodeReservationReleased},
			{"POST", "nope/refund", 404, wire.CodeReservationNotFound},
			{"POST", "paid/refund", 200, wire.StatusRefunded},
			{"POST", "paid/refund", 200, wire.StatusRefunded},
			{"POST", "paid/confirm", 409, wire.CodeReservationRefunded},
			{"DELETE", "paid", 409, wire.CodeReservationRefunded},
			{"GET", "paid/refund", 405, wire.CodeMethodNotAllowed},
		} {
			status, body := b.Do(t, c.method, "/vouchers/RF/reservations/"+c.path, nil)
			var got struct{ Error, Status string }
			_ = json.Unmarshal(body, &got)
			if status != c.status || got.Error+got.Status != c.code {
				t.Errorf("%s %s: %d %s; want %d %s", c.method, c.path, status, body, c.status, c.code)
			}
		}
		if st, _ := b.Do(t, "POST", "/vouchers/NOPE/reservations/paid/refund", nil); st != 404 {
			t.Errorf("refund of an unknown voucher: %d", st)
		}
		if a := reserve(t, b, "RF", "c-paid", "paid", 100); a.status != 409 || a.code != wire.CodeReservationRefunded {
			t.Errorf("reserve a refunded order again: %+v; want 409 %s", a, wire.CodeReservationRefunded)
		}
		if got := redemptionStatus(t, b, "RF", "held"); got != wire.StatusReserved {
			t.Errorf("the refused refund changed held to %s", got)
		}
		v := viewOf(t, b, "RF")
		if v.UsedCount != 1 || v.Counts[wire.StatusRefunded] != 1 {
			t.Errorf("after: %+v; want 1 used (held), 1 refunded", v)
		}
		b.CheckInvariants(t, "RF", []string{"held"})
	})
}

// A shopper refunds only its own order, found as confirm and release find it (its scope); a
// service refunds a shopper's order by the plain orderId, as it confirms one.
func TestRefundByShopperAndService(t *testing.T) {
	b, _ := startWithKeys(t, testKeys...)
	b.CreateVoucher(t, backendtest.Voucher{Code: "SHOPREF", Discount: 10, TotalLimit: 10, FlashSale: true})
	asEdge := func(method, uri, body, subject string) (int, string) {
		st, answer, _ := b.DoWithHeaders(t, method, uri, body, withSubject(secretEdge, subject))
		return st, string(answer)
	}
	base := "/vouchers/SHOPREF/reservations"
	for _, who := range []string{"alice", "bob"} {
		if st, body := asEdge("POST", base, `{"customerId":"`+who+`","orderId":"ord-1","orderAmount":100}`, who); st != 201 {
			t.Fatalf("%s reserving ord-1: %d %s", who, st, body)
		}
		if st, body := asEdge("POST", base+"/ord-1/confirm", "", who); st != 200 {
			t.Fatalf("%s confirming ord-1: %d %s", who, st, body)
		}
	}
	nst, nbody := asEdge("POST", base+"/ord-none/refund", "", "carol")
	st, body := asEdge("POST", base+"/ord-1/refund", "", "carol")
	if st != nst || st != 404 || body != nbody {
		t.Errorf("carol refunding others' ord-1: %d %s; an order nobody reserved: %d %s", st, body, nst, nbody)
	}
	if st, body := asEdge("POST", base+"/ord-1/refund", "", "alice"); st != 200 || body != `{"orderId":"ord-1","status":"REFUNDED"}` {
		t.Fatalf("alice refunding her ord-1: %d %s", st, body)
	}
	if st, body := asEdge("POST", base+"/ord-1/confirm", "", "bob"); st != 200 {
		t.Errorf("bob's ord-1 after alice's refund: %d %s; want still confirmed", st, body)
	}
	// a service names bob's order by its orderId (alice's is no longer active)
	if st, body := asEdge("POST", base+"/ord-1/refund", "", ""); st != 200 || body != `{"orderId":"ord-1","status":"REFUNDED"}` {
		t.Errorf("the service refunding bob's ord-1: %d %s", st, body)
	}
	if st, body := asEdge("POST", base+"/ord-1/refund?customerId=bob", "", ""); st != 200 {
		t.Errorf("the service refunding bob's ord-1 again, naming him: %d %s", st, body)
	}
	b.CheckInvariants(t, "SHOPREF", nil)
}
