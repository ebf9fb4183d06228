package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/store"
	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// The store's pages: each row once in key order, more only while rows follow, and each row's
// own confirm and release times.
func TestViewPages(t *testing.T) {
	s, pool := openStore(t)
	ctx := context.Background()
	for _, c := range []string{"C", "A", "B"} {
		createVoucher(t, s, c, 100, 10)
	}
	now := time.Now().Truncate(time.Microsecond) // what timestamptz keeps
	var orders []string
	confirmed := map[string]time.Time{}
	for i := range 7 {
		order := fmt.Sprintf("o%d", i)
		if _, err := s.Reserve(ctx, hold("B", fmt.Sprint(i%2), order, now), now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reserve(ctx, hold("A", "x", "a-"+order, now), now); err != nil && i == 0 {
			t.Fatal(err)
		}
		orders = append(orders, order)
		at := now.Add(time.Duration(i) * time.Second) // a time of its own for each row
		switch i % 3 {
		case 1:
			if _, err := s.Confirm(ctx, "B", order, at); err != nil {
				t.Fatal(err)
			}
			confirmed[order] = at
		case 2:
			if _, _, err := s.Release(ctx, "B", order, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	used := checkDB(t, pool, "B")

	var got []string
	for after, pages := int64(0), 0; ; pages++ {
		page, more, err := s.RedemptionPage(ctx, "B", voucher.RedemptionFilter{After: after}, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			got = append(got, r.OrderID)
			at, ok := confirmed[r.OrderID]
			switch {
			case ok != (r.ConfirmedAt != nil), ok && !r.ConfirmedAt.Equal(at):
				t.Errorf("%s: confirmedAt %v; want %v", r.OrderID, r.ConfirmedAt, at)
			case (r.Status == wire.StatusReleased) != (r.ReleasedAt != nil):
				t.Errorf("%s %s: releasedAt %v", r.OrderID, r.Status, r.ReleasedAt)
			}
		}
		if want := pages < 2; more != want || len(page) != []int{3, 3, 1}[pages] {
			t.Fatalf("page %d: %d rows, more %v", pages, len(page), more)
		}
		if !more {
			break
		}
		after = page[len(page)-1].ID
	}
	if !slices.Equal(got, orders) {
		t.Errorf("redemptions %v; want %v", got, orders)
	}
	page, more, err := s.RedemptionPage(ctx, "B", voucher.RedemptionFilter{CustomerID: "1", Status: wire.StatusConfirmed}, 10)
	want := []string{}
	for i := 1; i < 7; i += 2 {
		if i%3 == 1 {
			want = append(want, fmt.Sprintf("o%d", i))
		}
	}
	if err != nil || more || !slices.Equal(ids(page), want) {
		t.Errorf("customer 1, CONFIRMED: %v more %v err %v; want %v", ids(page), more, err, want)
	}

	vs, more, err := s.VoucherPage(ctx, voucher.VoucherFilter{}, 2)
	if err != nil || !more || len(vs) != 2 || vs[0].Code != "A" || vs[1].Code != "B" {
		t.Fatalf("first voucher page: %+v more %v err %v", vs, more, err)
	}
	if b := vs[1]; b.UsedCount != used || b.ByStatus[wire.StatusReserved] != 3 || b.ByStatus[wire.StatusConfirmed] != 2 || b.ByStatus[wire.StatusReleased] != 2 {
		t.Errorf("B: used %d, counts %v; want %d, 3 RESERVED, 2 CONFIRMED, 2 RELEASED", b.UsedCount, b.ByStatus, used)
	}
	vs, more, err = s.VoucherPage(ctx, voucher.VoucherFilter{After: "B"}, 2)
	if err != nil || more || len(vs) != 1 || vs[0].Code != "C" || fmt.Sprint(vs[0].ByStatus) != "map[CONFIRMED:0 REFUNDED:0 RELEASED:0 RESERVED:0]" {
		t.Errorf("last voucher page: %+v more %v err %v", vs, more, err)
	}
	if vs, more, err := s.VoucherPage(ctx, voucher.VoucherFilter{After: "C"}, 2); err != nil || more || len(vs) != 0 {
		t.Errorf("after the last voucher: %+v more %v err %v", vs, more, err)
	}
}

func ids(rs []voucher.RedemptionRecord) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.OrderID)
	}
	return out
}

// A page of one customer's redemptions reads only that customer's rows, through
// redemptions_voucher_customer, however many redemptions the voucher has (a customer has a few:
// per_user_limit active ones and what they released).
func TestCustomerPageUsesItsIndex(t *testing.T) {
	_, pool := openStore(t)
	ctx := context.Background()
	s := store.New(pool)
	for i := range 10 {
		createVoucher(t, s, fmt.Sprintf("BIG%d", i), 10_000, 1)
	}
	// 10,000 redemptions, most released: 100 customers of each voucher with 10 rows each
	if _, err := pool.Exec(ctx, `INSERT INTO redemptions (voucher_code, per_user_limit, customer_id, order_id, slot,
			status, order_amount, discount_amount, reserved_at, hold_expires_at, released_at)
		SELECT 'BIG' || (i % 10), 1, 'c' || (i / 10 % 100), 'o' || i, 1, 'RELEASED', 500, 100, now(), now(), now()
		FROM generate_series(0, 9999) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE redemptions`); err != nil {
		t.Fatal(err)
	}
	for _, f := range []voucher.RedemptionFilter{
		{CustomerID: "c7"},
		{CustomerID: "c7", After: 500},
		{CustomerID: "c7", Status: wire.StatusReleased},
	} {
		q, args := store.RedemptionPageQuery("BIG3", f, 51)
		rows, err := pool.Query(ctx, "EXPLAIN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "Index Cond: ((voucher_code = 'BIG3'::text) AND (customer_id = ") ||
			!strings.Contains(text, "redemptions_voucher_customer") || strings.Contains(text, "Seq Scan") {
			t.Errorf("filter %+v: plan\n%s\nwant a scan of redemptions_voucher_customer by voucher and customer", f, text)
		}
	}
}
