package api_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

// answer is one reservation's outcome as the client saw it.
type answer struct {
	status   int
	code     string // error code, for a 4xx/5xx
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
	a.code = e.Error
	return a
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
		b.CreateVoucher(t, backendtest.Voucher{Code: "TEN", Discount: 100, TotalLimit: 10, FlashSale: flash})

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
