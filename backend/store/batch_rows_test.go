package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"vouchergate/backend/voucher"
)

// A batch that carries one orderId for two customers, where the first customer's hold is not
// written (no free slot, or a neighbour took the last use) and the second's is: each hold is
// answered from its own row only, never from the other customer's, and one customer never gets
// two answers from one row.
func TestReserveManyAnswersAHoldOnlyFromItsOwnRow(t *testing.T) {
	s, pool := openStore(t)
	ctx := context.Background()
	now := time.Now()
	for _, tc := range []struct {
		name           string
		total, perUser int
		before         []voucher.Hold // written first, on their own
		holds          []voucher.Hold
		want           []error // nil: written
	}{{
		name: "A at its limit, then B with A's orderId", total: 10, perUser: 1,
		before: []voucher.Hold{hold("", "A", "o-a", now)},
		holds:  []voucher.Hold{hold("", "A", "o-x", now), hold("", "B", "o-x", now)},
		want:   []error{voucher.ErrAlreadyUsed, nil},
	}, {
		name: "A's second hold finds its slot taken by its first", total: 10, perUser: 1,
		holds: []voucher.Hold{hold("", "A", "o-w", now), hold("", "A", "o-x", now), hold("", "B", "o-x", now)},
		want:  []error{nil, voucher.ErrAlreadyUsed, nil},
	}, {
		name: "B first, then A at its limit", total: 10, perUser: 1,
		before: []voucher.Hold{hold("", "A", "o-a", now)},
		holds:  []voucher.Hold{hold("", "B", "o-x", now), hold("", "A", "o-x", now)},
		want:   []error{nil, voucher.ErrAlreadyUsed},
	}, {
		name: "the last use taken by a neighbour", total: 2, perUser: 2,
		before: []voucher.Hold{hold("", "C", "o-c", now)},
		holds:  []voucher.Hold{hold("", "D", "o-d", now), hold("", "A", "o-x", now), hold("", "B", "o-x", now)},
		want:   []error{nil, voucher.ErrOutOfStock, voucher.ErrOutOfStock},
	}, {
		name: "one customer's order twice beside another's", total: 10, perUser: 2,
		holds: []voucher.Hold{hold("", "A", "o-x", now), hold("", "A", "o-x", now), hold("", "B", "o-x", now)},
		want:  []error{nil, voucher.ErrOrderExists, voucher.ErrOrderExists},
	}, {
		name: "three customers on one orderId, the first two at their limit", total: 10, perUser: 1,
		before: []voucher.Hold{hold("", "A", "o-a", now), hold("", "B", "o-b", now)},
		holds:  []voucher.Hold{hold("", "A", "o-x", now), hold("", "B", "o-x", now), hold("", "E", "o-x", now), hold("", "F", "o-f", now)},
		want:   []error{voucher.ErrAlreadyUsed, voucher.ErrAlreadyUsed, nil, nil},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			code := voucherCode(tc.name)
			createVoucher(t, s, code, tc.total, tc.perUser)
			for _, h := range tc.before {
				h.VoucherCode, h.OrderID = code, code+"-"+h.OrderID // orderIds are unique across vouchers
				if _, err := s.Reserve(ctx, h, now); err != nil {
					t.Fatal(err)
				}
			}
			holds := make([]voucher.Hold, len(tc.holds))
			for i, h := range tc.holds {
				h.VoucherCode, h.OrderID = code, code+"-"+h.OrderID
				holds[i] = h
			}
			out, err := s.ReserveMany(ctx, code, holds)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want {
				if !errors.Is(out[i].Err, w) || (w == nil && out[i].Err != nil) {
					t.Errorf("hold %d (%s/%s): got %v, want %v", i, holds[i].CustomerID, holds[i].OrderID, out[i].Err, w)
				}
			}
			checkOwnRows(t, pool, code, holds, out)
			checkDB(t, pool, code)
		})
	}
}

// checkOwnRows fails the test unless every hold answered as written has a committed row of its
// own customer for its order, and no row answers two holds.
func checkOwnRows(t *testing.T, pool *pgxpool.Pool, code string, holds []voucher.Hold, out []voucher.Written) {
	t.Helper()
	answered := map[string]int{}
	for i, w := range out {
		if w.Err != nil {
			continue
		}
		h := holds[i]
		answered[h.OrderID]++
		if w.Redemption.CustomerID != h.CustomerID || w.Redemption.OrderID != h.OrderID {
			t.Errorf("hold %d (%s/%s) answered with %s/%s", i, h.CustomerID, h.OrderID, w.Redemption.CustomerID, w.Redemption.OrderID)
		}
		var customer, voucherCode, status string
		err := pool.QueryRow(context.Background(), `SELECT customer_id, voucher_code, status FROM redemptions WHERE order_id = $1`,
			h.OrderID).Scan(&customer, &voucherCode, &status)
		if err != nil || customer != h.CustomerID || voucherCode != code || status != "RESERVED" {
			t.Errorf("hold %d (%s/%s) answered as written; its order's row: customer %q voucher %q status %q (%v)",
				i, h.CustomerID, h.OrderID, customer, voucherCode, status, err)
		}
	}
	for order, n := range answered {
		if n > 1 {
			t.Errorf("order %s answered as written %d times", order, n)
		}
	}
}

// voucherCode is a voucher code made from a test case's name.
func voucherCode(name string) string {
	var h uint32 = 2166136261
	for i := range len(name) {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return fmt.Sprintf("ROWS-%08X", h)
}
