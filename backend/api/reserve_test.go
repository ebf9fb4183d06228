package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/backend/backendtest/history"
	"vouchergate/shared/keys"
	"vouchergate/shared/wire"
)

// answer is one reservation's outcome as the client saw it.
type answer struct {
	status   int
	code     string // error code, for a 4xx/5xx
	reason   string // NOT_ELIGIBLE's reason
	discount int64  // for a 201
}

// reserveAsClient is reserve by a client that retries a 503 with the same orderId, as
// Retry-After asks, a few times.
func reserveAsClient(t *testing.T, b *backendtest.Backend, code, customer, order string, amount int64) answer {
	a := reserve(t, b, code, customer, order, amount)
	for try := 0; a.status == 503 && try < 30; try++ {
		time.Sleep(200 * time.Millisecond)
		a = reserve(t, b, code, customer, order, amount)
	}
	return a
}

func reserve(t *testing.T, b *backendtest.Backend, code, customer, order string, amount int64) answer {
	status, body := b.Reserve(t, code, customer, order, amount)
	return decodeAnswer(t, status, body, order)
}

// decodeAnswer reads a reservation's answer: the discount of a 201, the code of an error.
func decodeAnswer(t *testing.T, status int, body []byte, order string) answer {
	a := answer{status: status}
	if status == 201 {
		var r wire.ReserveResponse
		if err := json.Unmarshal(body, &r); err != nil || r.OrderID != order {
			t.Errorf("201 body %s for order %s", body, order)
		}
		a.discount = r.DiscountAmount
		return a
	}
	var e wire.Error
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		t.Errorf("status %d with body %q: not a JSON error", status, body)
	}
	a.code, a.reason = e.Error, e.Reason
	return a
}

// recordSale makes bs record every reservation, confirm, release and refund they are sent in
// t's history, checked against the voucher model when t ends, and tells it v's limits.
func recordSale(t *testing.T, v backendtest.Voucher, bs ...*backendtest.Backend) {
	rec := history.For(t)
	rec.Voucher(v.Code, history.Voucher{TotalLimit: v.TotalLimit, PerUserLimit: max(v.PerUserLimit, 1), Discount: v.Discount})
	for _, b := range bs {
		b.Record(rec)
	}
}

func forBothPaths(t *testing.T, test func(t *testing.T, flash bool)) {
	for _, flash := range []bool{false, true} {
		name := "normal"
		if flash {
			name = "flash"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, flash)
		})
	}
}

// 200 customers race for 10 uses: exactly 10 win, on both paths.
func TestConcurrentCustomersNeverExceedTheLimit(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		v := backendtest.Voucher{Code: "TEN", Discount: 100, TotalLimit: 10, FlashSale: flash}
		b.CreateVoucher(t, v)
		recordSale(t, v, b)

		var wg sync.WaitGroup
		answers := make([]answer, 200)
		start := make(chan struct{})
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				answers[i] = reserveAsClient(t, b, "TEN", fmt.Sprintf("c%d", i), fmt.Sprintf("o%d", i), 1000)
			}()
		}
		close(start)
		wg.Wait()

		var granted []string
		for i, a := range answers {
			switch {
			case a.status == 201:
				granted = append(granted, fmt.Sprintf("o%d", i))
			case a.status == 409 && a.code == wire.CodeOutOfStock:
			default:
				t.Errorf("order o%d: %d %s", i, a.status, a.code)
			}
		}
		if len(granted) != 10 {
			t.Errorf("%d reservations granted; want exactly 10", len(granted))
		}
		b.CheckInvariants(t, "TEN", granted)
	})
}

// Two backends find a flash voucher missing from Redis (as after a restart) while a crowd
// reserves through both: each loads it at most once from the database, never adding uses.
func TestConcurrentLoadersNeverDoubleUses(t *testing.T) {
	cfg := backendtest.Config(t)
	b1 := backendtest.Start(t, cfg)
	b2 := backendtest.Start(t, cfg)
	v := backendtest.Voucher{Code: "LOAD", Discount: 1, TotalLimit: 30, FlashSale: true}
	b1.CreateVoucher(t, v)
	recordSale(t, v, b1, b2)
	var granted []string
	for i := range 10 {
		o := fmt.Sprintf("early%d", i)
		if a := reserve(t, b1, "LOAD", "e"+o, o, 10); a.status != 201 {
			t.Fatalf("reserve %s: %+v", o, a)
		}
		granted = append(granted, o)
	}
	k := keys.ForVoucher(cfg.RedisPrefix, "LOAD")
	b1.App.Redis.Del(context.Background(), k.Remaining, k.Users, k.Orders)

	answers := make([]answer, 100)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i] = reserveAsClient(t, []*backendtest.Backend{b1, b2}[i%2], "LOAD", fmt.Sprintf("c%d", i), fmt.Sprintf("o%d", i), 10)
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	for i, a := range answers {
		switch {
		case a.status == 201:
			wins++
			granted = append(granted, fmt.Sprintf("o%d", i))
		case a.status != 409:
			t.Errorf("o%d: %+v", i, a)
		}
	}
	if wins != 20 {
		t.Errorf("%d won after the reload; want the 20 uses left", wins)
	}
	b1.CheckInvariants(t, "LOAD", granted)
}
