package api_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

// edit sends PATCH /admin/vouchers/{code} with body and returns the status, the voucher it
// answers (a 200) and the error code (otherwise).
func edit(t *testing.T, b *backendtest.Backend, code string, body any) (int, wire.VoucherView, string) {
	t.Helper()
	status, raw := b.Do(t, "PATCH", "/admin/vouchers/"+code, body)
	var v wire.VoucherView
	if status == 200 {
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("PATCH %s: 200 %s: %v", code, raw, err)
		}
		return status, v, ""
	}
	var e wire.Error
	_ = json.Unmarshal(raw, &e)
	return status, v, e.Error
}

// mustEdit is edit that fails the test unless it answers 200.
func mustEdit(t *testing.T, b *backendtest.Backend, code string, body any) wire.VoucherView {
	t.Helper()
	status, v, errCode := edit(t, b, code, body)
	if status != 200 {
		t.Fatalf("PATCH %s %v: %d %s", code, body, status, errCode)
	}
	return v
}

// viewOf reads GET /admin/vouchers/{code}.
func viewOf(t *testing.T, b *backendtest.Backend, code string) wire.VoucherView {
	t.Helper()
	status, raw := b.Do(t, "GET", "/admin/vouchers/"+code, nil)
	var v wire.VoucherView
	if status != 200 || json.Unmarshal(raw, &v) != nil {
		t.Fatalf("GET /admin/vouchers/%s: %d %s", code, status, raw)
	}
	return v
}

// sale is a storm of reservations of new orders, each by a customer of its own, sent from
// workers goroutines to the backends in turn, retried on 503 as a client would.
type sale struct {
	mu      sync.Mutex
	granted []string          // orders answered 201
	refused map[string]int    // 4xx by code
	answers map[string]answer // by order
	done    atomic.Int64      // answers so far
}

// runSale sends n reservations of code ("<prefix>-i" orders) through bs and returns once all are
// answered; during, it calls at once (in its own goroutine, once) when after answers came.
func runSale(t *testing.T, bs []*backendtest.Backend, code, prefix string, n, workers, after int, at func()) *sale {
	t.Helper()
	s := &sale{refused: map[string]int{}, answers: map[string]answer{}}
	var next atomic.Int64
	var once sync.Once
	var wg, hook sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				order := fmt.Sprintf("%s-%d", prefix, i)
				a := reserveAsClient(t, bs[(int(i)+w)%len(bs)], code, "cust-"+order, order, 1000)
				s.mu.Lock()
				s.answers[order] = a
				if a.status == 201 {
					s.granted = append(s.granted, order)
				} else {
					s.refused[a.code]++
				}
				s.mu.Unlock()
				if s.done.Add(1) >= int64(after) && at != nil {
					once.Do(func() {
						hook.Add(1)
						go func() { defer hook.Done(); at() }()
					})
				}
			}
		}()
	}
	wg.Wait()
	hook.Wait()
	return s
}

// sellRest reserves new orders until the voucher answers OUT_OF_STOCK, and returns those granted.
func sellRest(t *testing.T, b *backendtest.Backend, code, prefix string) []string {
	t.Helper()
	var granted []string
	for i := 0; ; i++ {
		order := fmt.Sprintf("%s-%d", prefix, i)
		a := reserveAsClient(t, b, code, "cust-"+order, order, 1000)
		switch {
		case a.status == 201:
			granted = append(granted, order)
		case a.status == 409 && a.code == wire.CodeOutOfStock:
			return granted
		default:
			t.Fatalf("selling the rest of %s: %s answered %+v", code, order, a)
		}
	}
}

// deref is *p, or -1 for nil, for messages.
func deref(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}
