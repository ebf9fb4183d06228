package api_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

// getPage asks for path and decodes a 200's body into page.
func getPage(t *testing.T, b *backendtest.Backend, path string, page any) {
	t.Helper()
	status, body := b.Do(t, "GET", path, nil)
	if status != 200 {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	if err := json.Unmarshal(body, page); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// voucherPages walks GET /admin/vouchers page by page from the first and returns every voucher
// in the order given and the size of each page.
func voucherPages(t *testing.T, b *backendtest.Backend, limit int) ([]wire.VoucherView, []int) {
	t.Helper()
	var all []wire.VoucherView
	var sizes []int
	for after := ""; ; {
		q := url.Values{"limit": {fmt.Sprint(limit)}}
		if after != "" {
			q.Set("after", after)
		}
		var page wire.VoucherPage
		getPage(t, b, "/admin/vouchers?"+q.Encode(), &page)
		all, sizes = append(all, page.Vouchers...), append(sizes, len(page.Vouchers))
		if page.Next == "" {
			return all, sizes
		}
		if len(page.Vouchers) == 0 || page.Next != page.Vouchers[len(page.Vouchers)-1].Code {
			t.Fatalf("next %q is not the last code of its page %+v", page.Next, page.Vouchers)
		}
		if len(sizes) > 100 {
			t.Fatal("the pages never end")
		}
		after = page.Next
	}
}

// The voucher list walks every voucher once, in code order, each as GET /admin/vouchers/{code}
// answers it but without redisRemaining; next is given only while more follow.
func TestVoucherListPages(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	codes := []string{"V7", "V1", "V5", "V3", "V6", "V2", "V4"} // created out of order
	for i, c := range codes {
		b.CreateVoucher(t, backendtest.Voucher{Code: c, Discount: int64(10 * (i + 1)), TotalLimit: 5, PerUserLimit: 2, FlashSale: i%2 == 0})
	}
	// some redemptions to count: on V1 (normal) and V5 (flash)
	for _, c := range []string{"V1", "V5"} {
		for _, o := range []string{"a", "b", "c"} {
			if a := reserveAsClient(t, b, c, "cust-"+o, c+"-"+o, 100); a.status != 201 {
				t.Fatalf("reserve %s-%s: %+v", c, o, a)
			}
		}
		if st, body := b.Do(t, "POST", "/vouchers/"+c+"/reservations/"+c+"-a/confirm", nil); st != 200 {
			t.Fatalf("confirm: %d %s", st, body)
		}
		if st, body := b.Do(t, "DELETE", "/vouchers/"+c+"/reservations/"+c+"-b", nil); st != 200 {
			t.Fatalf("release: %d %s", st, body)
		}
	}
	sorted := slices.Sorted(slices.Values(codes))

	for _, c := range []struct {
		limit int
		sizes []int
	}{
		{3, []int{3, 3, 1}},
		{7, []int{7}}, // a full last page: no next, since nothing follows
		{1, []int{1, 1, 1, 1, 1, 1, 1}},
		{500, []int{7}},
	} {
		all, sizes := voucherPages(t, b, c.limit)
		var got []string
		for _, v := range all {
			got = append(got, v.Code)
		}
		if !slices.Equal(got, sorted) || !slices.Equal(sizes, c.sizes) {
			t.Errorf("limit %d: codes %v in pages of %v; want %v in pages of %v", c.limit, got, sizes, sorted, c.sizes)
		}
		if c.limit != 3 {
			continue
		}
		for _, v := range all {
			var one wire.VoucherView
			getPage(t, b, "/admin/vouchers/"+v.Code, &one)
			one.RedisRemaining = nil
			if fmt.Sprint(v) != fmt.Sprint(one) || !v.StartsAt.Equal(one.StartsAt) {
				t.Errorf("listed %+v; GET %s answers %+v", v, v.Code, one)
			}
		}
		for _, v := range all {
			want := map[string]int{"RESERVED": 0, "CONFIRMED": 0, "RELEASED": 0, "REFUNDED": 0}
			used := 0
			if v.Code == "V1" || v.Code == "V5" {
				want = map[string]int{"RESERVED": 1, "CONFIRMED": 1, "RELEASED": 1, "REFUNDED": 0}
				used = 2
			}
			if fmt.Sprint(v.Counts) != fmt.Sprint(want) || v.UsedCount != used {
				t.Errorf("%s: usedCount %d counts %v; want %d %v", v.Code, v.UsedCount, v.Counts, used, want)
			}
		}
	}

	// the default limit, and what the body holds
	status, body := b.Do(t, "GET", "/admin/vouchers", nil)
	var page wire.VoucherPage
	if err := json.Unmarshal(body, &page); status != 200 || err != nil || len(page.Vouchers) != 7 {
		t.Fatalf("default page: %d %s", status, body)
	}
	if s := string(body); strings.Contains(s, "redisRemaining") || strings.Contains(s, `"next"`) {
		t.Errorf("a list of every voucher holds redisRemaining or next: %s", s)
	}
	// after the last code: an empty list, not null
	if status, body := b.Do(t, "GET", "/admin/vouchers?after=V7", nil); status != 200 || string(body) != `{"vouchers":[]}` {
		t.Errorf("after the last code: %d %s", status, body)
	}
	// after a code no voucher has: the ones that sort after it
	getPage(t, b, "/admin/vouchers?after=V35", &page)
	if len(page.Vouchers) != 4 || page.Vouchers[0].Code != "V4" {
		t.Errorf("after V35: %+v; want V4, V5, V6, V7", page.Vouchers)
	}
}

// redemptionPages walks a voucher's redemptions with query (limit and filters) page by page and
// returns them in the order given, with the size of each page.
func redemptionPages(t *testing.T, b *backendtest.Backend, code string, query url.Values) ([]wire.Redemption, []int) {
	t.Helper()
	var all []wire.Redemption
	var sizes []int
	for {
		var page wire.RedemptionPage
		getPage(t, b, "/admin/vouchers/"+code+"/redemptions?"+query.Encode(), &page)
		all, sizes = append(all, page.Redemptions...), append(sizes, len(page.Redemptions))
		if page.Next == "" {
			return all, sizes
		}
		if len(sizes) > 100 {
			t.Fatal("the pages never end")
		}
		query.Set("after", page.Next)
	}
}

func orderIDs(rs []wire.Redemption) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.OrderID
	}
	return out
}

// The redemption list walks every redemption once in the order they were made, filtered by
// status and by customer (42 sent as a number and as a string is one customer), and its counts
// are what the reservations, confirms and releases made.
func TestRedemptionListPages(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		b.CreateVoucher(t, backendtest.Voucher{Code: "LIST", Discount: 30, TotalLimit: 100, PerUserLimit: 25, FlashSale: flash})
		b.CreateVoucher(t, backendtest.Voucher{Code: "OTHER", Discount: 30, TotalLimit: 100, FlashSale: flash})
		customers := []string{`42`, `"42"`, `"alice"`, `"042"`} // as JSON
		var orders []string
		byStatus := map[string][]string{}
		byCustomer := map[string][]string{}
		for i := range 25 {
			order := fmt.Sprintf("o-%02d", i)
			customer := customers[i%4]
			if a := reserveRaw(t, b, "LIST", customer, order); a.status != 201 {
				t.Fatalf("reserve %s for %s: %+v", order, customer, a)
			}
			// another voucher's redemption between each of LIST's: not in its list
			if a := reserveRaw(t, b, "OTHER", fmt.Sprint(1000+i), "x-"+order); a.status != 201 {
				t.Fatalf("reserve on OTHER: %+v", a)
			}
			status := wire.StatusReserved
			switch i % 3 {
			case 1:
				status = wire.StatusConfirmed
				if st, body := b.Do(t, "POST", "/vouchers/LIST/reservations/"+order+"/confirm", nil); st != 200 {
					t.Fatalf("confirm %s: %d %s", order, st, body)
				}
			case 2:
				status = wire.StatusReleased
				if st, body := b.Do(t, "DELETE", "/vouchers/LIST/reservations/"+order, nil); st != 200 {
					t.Fatalf("release %s: %d %s", order, st, body)
				}
			}
			orders = append(orders, order)
			byStatus[status] = append(byStatus[status], order)
			stored := strings.Trim(customer, `"`)
			byCustomer[stored] = append(byCustomer[stored], order)
		}

		all, sizes := redemptionPages(t, b, "LIST", url.Values{"limit": {"10"}})
		if got := orderIDs(all); !slices.Equal(got, orders) || !slices.Equal(sizes, []int{10, 10, 5}) {
			t.Errorf("orders %v in pages of %v; want %v in pages of [10 10 5]", got, sizes, orders)
		}
		counts := map[string]int{}
		for i, r := range all {
			counts[r.Status]++
			switch {
			case slices.Contains(byStatus[wire.StatusConfirmed], r.OrderID):
				if r.Status != wire.StatusConfirmed || r.ConfirmedAt == nil || r.ReleasedAt != nil {
					t.Errorf("confirmed %s: %+v", r.OrderID, r)
				}
			case slices.Contains(byStatus[wire.StatusReleased], r.OrderID):
				if r.Status != wire.StatusReleased || r.ReleasedAt == nil || r.ConfirmedAt != nil {
					t.Errorf("released %s: %+v", r.OrderID, r)
				}
			default:
				if r.Status != wire.StatusReserved || r.ConfirmedAt != nil || r.ReleasedAt != nil {
					t.Errorf("reserved %s: %+v", r.OrderID, r)
				}
			}
			if r.OrderAmount != 1000 || r.DiscountAmount != 30 || r.ReservedAt.IsZero() ||
				!r.HoldExpiresAt.After(r.ReservedAt) || r.CustomerID != strings.Trim(customers[i%4], `"`) {
				t.Errorf("redemption %d: %+v", i, r)
			}
		}
		var view wire.VoucherView
		getPage(t, b, "/admin/vouchers/LIST", &view)
		counts["REFUNDED"] += 0 // the voucher counts every status, those it has none of too
		if fmt.Sprint(counts) != fmt.Sprint(view.Counts) || view.UsedCount != counts["RESERVED"]+counts["CONFIRMED"] {
			t.Errorf("listed by status %v; the voucher counts %v, usedCount %d", counts, view.Counts, view.UsedCount)
		}
		if counts["RESERVED"] != 9 || counts["CONFIRMED"] != 8 || counts["RELEASED"] != 8 {
			t.Errorf("listed by status %v; want 9 RESERVED, 8 CONFIRMED, 8 RELEASED", counts)
		}

		for _, c := range []struct {
			query url.Values
			want  []string
		}{
			{url.Values{"status": {"RESERVED"}, "limit": {"4"}}, byStatus[wire.StatusReserved]},
			{url.Values{"status": {"CONFIRMED"}, "limit": {"3"}}, byStatus[wire.StatusConfirmed]},
			{url.Values{"status": {"RELEASED"}}, byStatus[wire.StatusReleased]},
			{url.Values{"customerId": {"42"}, "limit": {"5"}}, byCustomer["42"]}, // sent as 42 and as "42"
			{url.Values{"customerId": {"042"}, "limit": {"2"}}, byCustomer["042"]},
			{url.Values{"customerId": {"alice"}, "status": {"RELEASED"}, "limit": {"1"}}, intersect(byCustomer["alice"], byStatus[wire.StatusReleased])},
			{url.Values{"customerId": {"nobody"}}, nil},
			{url.Values{"after": {"999999999"}}, nil},
		} {
			got, _ := redemptionPages(t, b, "LIST", c.query)
			if !slices.Equal(orderIDs(got), c.want) {
				t.Errorf("%s: %v; want %v", c.query.Encode(), orderIDs(got), c.want)
			}
		}
		if n := len(byCustomer["42"]); n != 13 {
			t.Errorf("customer 42 has %d redemptions; the test means 13 (as 42 and as \"42\")", n)
		}
		if st, body := b.Do(t, "GET", "/admin/vouchers/LIST/redemptions?customerId=nobody", nil); st != 200 || string(body) != `{"redemptions":[]}` {
			t.Errorf("no match: %d %s; want an empty list", st, body)
		}
		b.CheckInvariants(t, "LIST", append(byStatus[wire.StatusReserved], byStatus[wire.StatusConfirmed]...))
	})
}

func intersect(a, b []string) []string {
	var out []string
	for _, s := range a {
		if slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// The lists refuse a bad, repeated or unknown query parameter with a 400 naming it, an unknown
// voucher with a 404, and a request without the admin token with a 401.
func TestAdminViewsRefuse(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	b.CreateVoucher(t, backendtest.Voucher{Code: "REF", Discount: 5, TotalLimit: 5})
	const vouchers, redemptions = "/admin/vouchers", "/admin/vouchers/REF/redemptions"
	for _, c := range []struct {
		path, query, mentions string
	}{
		{vouchers, "limit=ten", "limit"},
		{vouchers, "limit=0", "limit"},
		{vouchers, "limit=-1", "limit"},
		{vouchers, "limit=501", "limit"},
		{vouchers, "limit=", "limit"},
		{vouchers, "limit=1.5", "limit"},
		{vouchers, "after=not%20a%20code", "after"},
		{vouchers, "active=yes", "active"},
		{vouchers, "ended=1", "ended"},
		{vouchers, "active=true&active=false", "active"},
		{vouchers, "after=", "after"},
		{vouchers, "after=" + strings.Repeat("A", 33), "after"},
		{vouchers, "limit=1&limit=2", "limit"},
		{vouchers, "status=RESERVED", "status"}, // a filter of the other list
		{vouchers, "sort=code", "sort"},
		{redemptions, "limit=x", "limit"},
		{redemptions, "limit=0", "limit"},
		{redemptions, "limit=-3", "limit"},
		{redemptions, "limit=501", "limit"},
		{redemptions, "after=0", "after"},
		{redemptions, "after=-1", "after"},
		{redemptions, "after=REF", "after"},
		{redemptions, "after=", "after"},
		{redemptions, "after=99999999999999999999", "after"},
		{redemptions, "status=reserved", "status"},
		{redemptions, "status=EXPIRED", "status"},
		{redemptions, "status=", "status"},
		{redemptions, "status=RESERVED&status=RELEASED", "status"},
		{redemptions, "customerId=", "customerId"},
		{redemptions, "customerId=" + strings.Repeat("c", 65), "customerId"},
		{redemptions, "customerId=a%2Fb", "customerId"},
		{redemptions, "customerId=a%00b", "customerId"},
		{redemptions, "customerId=%FF", "customerId"},
		{redemptions, "customer=42", "customer"},
		{redemptions, "orderId=o", "orderId"},
	} {
		status, body := b.Do(t, "GET", c.path+"?"+c.query, nil)
		var e wire.Error
		_ = json.Unmarshal(body, &e)
		if status != 400 || e.Error != wire.CodeBadRequest || !strings.Contains(e.Message, c.mentions) {
			t.Errorf("%s?%s: %d %s; want 400 BAD_REQUEST naming %s", c.path, c.query, status, body, c.mentions)
		}
	}
	// the largest limit and a customerId of the most bytes a reservation takes are fine
	for _, q := range []string{"limit=500", "customerId=" + strings.Repeat("c", 64), "after=9223372036854775807"} {
		if status, body := b.Do(t, "GET", redemptions+"?"+q, nil); status != 200 {
			t.Errorf("%s?%s: %d %s; want 200", redemptions, q, status, body)
		}
	}
	if status, code := statusOf(t, b, "GET", "/admin/vouchers/NOSUCH/redemptions"); status != 404 || code != wire.CodeVoucherNotFound {
		t.Errorf("redemptions of an unknown voucher: %d %s; want 404 %s", status, code, wire.CodeVoucherNotFound)
	}
	for _, path := range []string{vouchers, redemptions, "/admin/vouchers/NOSUCH/redemptions"} {
		for _, auth := range []string{"", "Bearer wrong"} {
			if status, body := b.DoWithHeader(t, "GET", path, "Authorization", auth); status != 401 {
				t.Errorf("GET %s with Authorization %q: %d %s; want 401", path, auth, status, body)
			}
		}
	}
}
