package api_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/api"
	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
)

// A percentage voucher takes floor(amount × percent / 100) off, at most its cap and the amount,
// in the order's minor units, fixed at the reservation: a retry after an edit of the discount
// gets its first amount, a new order the edited one.
func TestPercentageDiscounts(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		now := time.Now()
		status, body := b.Do(t, "POST", "/admin/vouchers", map[string]any{"code": "pct", "discountPercent": 15,
			"maxDiscountAmount": 500, "totalLimit": 100, "perUserLimit": 100, "startsAt": now.Add(-time.Minute),
			"endsAt": now.Add(time.Hour), "flashSale": flash})
		var created wire.VoucherView
		if status != 201 || json.Unmarshal(body, &created) != nil || created.Code != "PCT" || created.DiscountPercent != 15 ||
			created.MaxDiscountAmount == nil || *created.MaxDiscountAmount != 500 || created.DiscountAmount != 0 {
			t.Fatalf("create a percentage voucher: %d %s", status, body)
		}
		for i, c := range []struct{ amount, want int64 }{
			{0, 0}, {1, 0}, {6, 0}, {7, 1}, {99, 14}, {100, 15}, {999, 149}, {3333, 499}, {3334, 500}, {10_000, 500},
			{9_223_372_036_854_775_807, 500},
		} {
			order := fmt.Sprintf("p-%d", i)
			if a := reserve(t, b, "PCT", "c", order, c.amount); a.status != 201 || a.discount != c.want {
				t.Errorf("15%% capped at 500 of %d: %+v; want %d off", c.amount, a, c.want)
			}
		}
		mustEdit(t, b, "PCT", map[string]any{"maxDiscountAmount": nil, "discountPercent": 100})
		if a := reserve(t, b, "PCT", "c", "p-9", 10_000); a.discount != 500 {
			t.Errorf("a retry after the edit: %+v; want its first discount, 500", a)
		}
		if a := reserve(t, b, "PCT", "c", "full", 10_000); a.status != 201 || a.discount != 10_000 {
			t.Errorf("100%% without a cap: %+v; want the whole amount", a)
		}
		v := mustEdit(t, b, "PCT", map[string]any{"discountAmount": 30})
		if v.DiscountPercent != 0 || v.MaxDiscountAmount != nil || v.DiscountAmount != 30 {
			t.Errorf("back to a fixed amount: %+v", v)
		}
		if a := reserve(t, b, "PCT", "c", "fixed", 10); a.discount != 10 {
			t.Errorf("30 off an order of 10: %+v; want 10", a)
		}
		if status, _, code := edit(t, b, "PCT", map[string]any{"maxDiscountAmount": 5}); status != 400 || code != wire.CodeBadRequest {
			t.Errorf("a cap on a fixed discount: %d %s; want 400", status, code)
		}
		b.CheckInvariants(t, "PCT", nil)
	})
}

// Every edit is recorded with its time and the fields it changed, before and after, a page at
// a time; an edit that changes nothing records nothing and keeps the revision.
func TestVoucherChanges(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	b.CreateVoucher(t, backendtest.Voucher{Code: "LOG", Discount: 10, TotalLimit: 5, FlashSale: true})
	start := time.Now()
	mustEdit(t, b, "LOG", map[string]any{"totalLimit": 8, "active": false})
	mustEdit(t, b, "LOG", map[string]any{"totalLimit": 8}) // nothing changes
	mustEdit(t, b, "LOG", map[string]any{"discountPercent": 20, "maxDiscountAmount": 9_007_199_254_740_993, "holdTtl": "90s"})
	v := mustEdit(t, b, "LOG", map[string]any{"holdTtl": nil, "active": true})
	if v.Revision != 4 || v.HoldTTL != "15m0s" || !v.Active {
		t.Errorf("after three changes: %+v; want revision 4, the default hold time, active", v)
	}
	// amounts are int64 and must come back exact: decode them as json.Number
	status, raw := b.Do(t, "GET", "/admin/vouchers/LOG/changes", nil)
	var page wire.VoucherChanges
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&page); status != 200 || err != nil {
		t.Fatalf("changes: %d %s: %v", status, raw, err)
	}
	want := []struct{ before, after string }{
		{`{"active":true,"totalLimit":5}`, `{"active":false,"totalLimit":8}`},
		{`{"discountAmount":10,"discountPercent":null,"holdTtl":null,"maxDiscountAmount":null}`,
			`{"discountAmount":0,"discountPercent":20,"holdTtl":"1m30s","maxDiscountAmount":9007199254740993}`},
		{`{"active":false,"holdTtl":"1m30s"}`, `{"active":true,"holdTtl":null}`},
	}
	if len(page.Changes) != len(want) || page.Next != "" {
		t.Fatalf("changes: %+v; want %d", page, len(want))
	}
	for i, c := range page.Changes {
		before, _ := json.Marshal(c.Before)
		after, _ := json.Marshal(c.After)
		if c.Revision != int64(i+2) || string(before) != want[i].before || string(after) != want[i].after ||
			c.ChangedAt.Before(start.Add(-time.Second)) || c.ChangedAt.After(time.Now()) {
			t.Errorf("change %d: revision %d at %v, %s → %s; want revision %d, %s → %s", i, c.Revision, c.ChangedAt,
				before, after, i+2, want[i].before, want[i].after)
		}
	}
	var first, second wire.VoucherChanges
	getPage(t, b, "/admin/vouchers/log/changes?limit=1", &first)
	getPage(t, b, "/admin/vouchers/LOG/changes?limit=1&after="+first.Next, &second)
	if len(first.Changes) != 1 || first.Next != "2" || len(second.Changes) != 1 || second.Changes[0].Revision != 3 {
		t.Errorf("pages of one: %+v then %+v", first, second)
	}
	for _, q := range []string{"after=0", "after=x", "limit=0", "since=2"} {
		if st, body := b.Do(t, "GET", "/admin/vouchers/LOG/changes?"+q, nil); st != 400 {
			t.Errorf("changes?%s: %d %s; want 400", q, st, body)
		}
	}
	if st, _ := b.Do(t, "GET", "/admin/vouchers/NOPE/changes", nil); st != 404 {
		t.Errorf("changes of an unknown voucher: %d; want 404", st)
	}
	b.CheckInvariants(t, "LOG", nil)
}

// A bad edit is a 400 naming what is wrong, and writes nothing: the voucher, its revision, its
// change records and the Redis gate's definition stay as they were.
func TestBadEditsWriteNothing(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	b.CreateVoucher(t, backendtest.Voucher{Code: "SAFE", Discount: 10, TotalLimit: 5, FlashSale: true})
	if a := reserve(t, b, "SAFE", "c1", "o1", 100); a.status != 201 {
		t.Fatalf("reserve: %+v", a)
	}
	before, gate := viewOf(t, b, "SAFE"), readRedis(t, b, "SAFE")
	for _, c := range []struct {
		body     string
		status   int
		mentions string
	}{
		{`{}`, 400, "changes nothing"},
		{`{"totalLimit":-1}`, 400, "totalLimit"},
		{`{"totalLimit":10000001}`, 400, "totalLimit"},
		{`{"totalLimit":"5"}`, 400, "totalLimit"},
		{`{"totalLimit":null}`, 400, "totalLimit"},
		{`{"totalLimit":0}`, 409, "below the 1 uses taken"},
		{`{"perUserLimit":0}`, 400, "perUserLimit"},
		{`{"perUserLimit":1001}`, 400, "perUserLimit"},
		{`{"discountAmount":-1}`, 400, "discountAmount"},
		{`{"discountPercent":0}`, 400, "discountPercent"},
		{`{"discountPercent":101}`, 400, "discountPercent"},
		{`{"discountPercent":10,"discountAmount":5}`, 400, "exclude"},
		{`{"discountAmount":5,"maxDiscountAmount":3}`, 400, "maxDiscountAmount"},
		{`{"maxDiscountAmount":3}`, 400, "maxDiscountAmount"},
		{`{"maxDiscountAmount":-3,"discountPercent":5}`, 400, "maxDiscountAmount"},
		{`{"minOrderAmount":-5}`, 400, "minOrderAmount"},
		{`{"startsAt":"tomorrow"}`, 400, "startsAt"},
		{`{"endsAt":"2020-01-01T00:00:00Z"}`, 400, "endsAt"},
		{`{"startsAt":"2030-01-01T00:00:00Z","endsAt":"2029-01-01T00:00:00Z"}`, 400, "endsAt"},
		{`{"active":"no"}`, 400, "active"},
		{`{"holdTtl":"15"}`, 400, "holdTtl"},
		{`{"holdTtl":"500ms"}`, 400, "holdTtl"},
		{`{"holdTtl":"25h"}`, 400, "holdTtl"},
		{`{"holdTtl":"1.0001s"}`, 400, "holdTtl"},
		{`{"flashSale":false}`, 400, "flashSale"},
		{`{"code":"OTHER"}`, 400, "code"},
		{`{"totalLimt":50}`, 400, "totalLimt"},
		{`{"totalLimit":50} x`, 400, "after the JSON object"},
		{`[{"totalLimit":50}]`, 400, "object"},
		{"{\"holdTtl\":\"1\xffs\"}", 400, "UTF-8"},
	} {
		status, body := b.Do(t, "PATCH", "/admin/vouchers/SAFE", c.body)
		var e wire.Error
		_ = json.Unmarshal(body, &e)
		if status != c.status || !strings.Contains(e.Message, c.mentions) {
			t.Errorf("PATCH %s: %d %s; want %d naming %q", c.body, status, body, c.status, c.mentions)
		}
	}
	after := viewOf(t, b, "SAFE")
	if *after.RedisRemaining != *before.RedisRemaining {
		t.Errorf("bad edits changed redis's remaining: %d, before %d", *after.RedisRemaining, *before.RedisRemaining)
	}
	after.RedisRemaining, before.RedisRemaining = nil, nil
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("bad edits changed the voucher: %+v, before %+v", after, before)
	}
	sameRedis(t, gate, readRedis(t, b, "SAFE"))
	var page wire.VoucherChanges
	getPage(t, b, "/admin/vouchers/SAFE/changes", &page)
	if len(page.Changes) != 0 {
		t.Errorf("bad edits recorded %+v", page.Changes)
	}
	if st, _, code := edit(t, b, "NOPE", map[string]any{"totalLimit": 5}); st != 404 || code != wire.CodeVoucherNotFound {
		t.Errorf("edit an unknown voucher: %d %s", st, code)
	}
	b.CheckInvariants(t, "SAFE", []string{"o1"})
}

// A voucher never redeemed is deleted (204), its Redis keys with it, and its code may be used
// again; one with a redemption, even released, is 409 VOUCHER_IN_USE and stays.
func TestDeleteVoucher(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		b.CreateVoucher(t, backendtest.Voucher{Code: "GONE", Discount: 10, TotalLimit: 5, FlashSale: flash})
		b.CreateVoucher(t, backendtest.Voucher{Code: "USED", Discount: 10, TotalLimit: 5, FlashSale: flash})
		reserve(t, b, "USED", "c1", "u1", 100)
		b.Do(t, "DELETE", "/vouchers/USED/reservations/u1", nil)
		if st, body := b.Do(t, "DELETE", "/admin/vouchers/gone", nil); st != 204 || len(body) != 0 {
			t.Fatalf("delete a voucher never redeemed: %d %s", st, body)
		}
		if st, _ := b.Do(t, "GET", "/admin/vouchers/GONE", nil); st != 404 {
			t.Errorf("a deleted voucher: %d; want 404", st)
		}
		if a := reserve(t, b, "GONE", "c1", "g0", 100); a.status != 404 || a.code != wire.CodeVoucherNotFound {
			t.Errorf("reserve a deleted voucher: %+v", a)
		}
		if g := backendtest.ReadGate(t, b.App.Redis, b.Config.RedisPrefix, "GONE"); g.Loaded || len(g.Definition) != 0 {
			t.Errorf("a deleted voucher's gate: %+v", g)
		}
		if st, body := b.Do(t, "DELETE", "/admin/vouchers/USED", nil); st != 409 || !strings.Contains(string(body), wire.CodeVoucherInUse) {
			t.Errorf("delete a voucher with a released redemption: %d %s; want 409 %s", st, body, wire.CodeVoucherInUse)
		}
		if st, _ := b.Do(t, "DELETE", "/admin/vouchers/GONE", nil); st != 404 {
			t.Errorf("delete again: %d; want 404", st)
		}
		// made again, of the other kind: its writes are that kind's
		b.CreateVoucher(t, backendtest.Voucher{Code: "GONE", Discount: 10, TotalLimit: 5, FlashSale: !flash})
		if a := reserve(t, b, "GONE", "c1", "g1", 100); a.status != 201 {
			t.Errorf("reserve the voucher made again: %+v", a)
		}
		b.CheckInvariants(t, "GONE", []string{"g1"})
		b.CheckInvariants(t, "USED", nil)
	})
}

// The vouchers list keeps those active or paused, ended or not, as asked, a page at a time.
func TestVoucherListFilters(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	now := time.Now()
	for _, c := range []struct {
		code  string
		ended bool
	}{{"A1", false}, {"A2", true}, {"P1", false}, {"P2", true}, {"A3", false}} {
		v := backendtest.Voucher{Code: c.code, Discount: 1, TotalLimit: 1}
		if c.ended {
			v.StartsAt, v.EndsAt = now.Add(-2*time.Hour), now.Add(-time.Hour)
		}
		b.CreateVoucher(t, v)
		if c.code[0] == 'P' {
			mustEdit(t, b, c.code, map[string]any{"active": false})
		}
	}
	for q, want := range map[string]string{
		"":                                  "A1 A2 A3 P1 P2",
		"active=true":                       "A1 A2 A3",
		"active=false":                      "P1 P2",
		"ended=true":                        "A2 P2",
		"ended=false":                       "A1 A3 P1",
		"active=true&ended=true":            "A2",
		"active=false&ended=false&after=a1": "P1",
	} {
		var codes []string
		after := ""
		for {
			var page wire.VoucherPage
			getPage(t, b, "/admin/vouchers?limit=1&"+q+after, &page)
			for _, v := range page.Vouchers {
				codes = append(codes, v.Code)
			}
			if page.Next == "" {
				break
			}
			after = "&after=" + url.QueryEscape(page.Next)
			if strings.Contains(q, "after=") {
				break
			}
		}
		if got := strings.Join(codes, " "); got != want {
			t.Errorf("vouchers?%s: %s; want %s", q, got, want)
		}
	}
}

// caseRoutes sends each route that names a voucher with the code in lower case, after the
// route before it: each must act on the voucher as stored (upper case) and answer as for it.
var caseRoutes = []struct {
	api.Endpoint
	uri, body string
	status    int
	names     bool // the answer names the voucher: as stored, CASE-1
}{
	{api.Endpoint{Method: "POST", Path: "/admin/vouchers"}, "/admin/vouchers", "", 201, true},
	{api.Endpoint{Method: "POST", Path: "/admin/vouchers/{code}/warmup"}, "/admin/vouchers/case-1/warmup", "", 200, true},
	{api.Endpoint{Method: "POST", Path: "/vouchers/{code}/validate"}, "/vouchers/case-1/validate", `{"customerId":"a","orderId":"a1","orderAmount":100}`, 200, false},
	{api.Endpoint{Method: "POST", Path: "/vouchers/{code}/reservations"}, "/vouchers/Case-1/reservations", `{"customerId":"a","orderId":"a1","orderAmount":100}`, 201, false},
	{api.Endpoint{Method: "POST", Path: "/vouchers/{code}/reservations/{orderId}/confirm"}, "/vouchers/cASE-1/reservations/a1/confirm", "", 200, false},
	{api.Endpoint{Method: "POST", Path: "/vouchers/{code}/reservations/{orderId}/refund"}, "/vouchers/case-1/reservations/a1/refund", "", 200, false},
	{api.Endpoint{Method: "DELETE", Path: "/vouchers/{code}/reservations/{orderId}"}, "/vouchers/case-1/reservations/a1", "", 409, false},
	{api.Endpoint{Method: "GET", Path: "/vouchers/{code}/state"}, "/vouchers/case-1/state", "", 200, true},
	{api.Endpoint{Method: "PATCH", Path: "/admin/vouchers/{code}"}, "/admin/vouchers/case-1", `{"totalLimit":7}`, 200, true},
	{api.Endpoint{Method: "GET", Path: "/admin/vouchers/{code}"}, "/admin/vouchers/case-1", "", 200, true},
	{api.Endpoint{Method: "GET", Path: "/admin/vouchers/{code}/redemptions"}, "/admin/vouchers/case-1/redemptions", "", 200, false},
	{api.Endpoint{Method: "GET", Path: "/admin/vouchers/{code}/changes"}, "/admin/vouchers/case-1/changes", "", 200, false},
	{api.Endpoint{Method: "GET", Path: "/admin/vouchers"}, "/admin/vouchers?after=case-0", "", 200, true},
	{api.Endpoint{Method: "POST", Path: "/admin/reconcile"}, "/admin/reconcile?code=case-1", "", 200, false},
	{api.Endpoint{Method: "DELETE", Path: "/admin/vouchers/{code}"}, "/admin/vouchers/case-1", "", 409, false},
}

// Codes are case-insensitive on every route: each route naming a voucher, sent with the code
// in mixed case, acts on the voucher stored and answered in upper case.
func TestCodesInAnyCaseOnEveryRoute(t *testing.T) {
	covered := map[api.Endpoint]bool{}
	for _, r := range caseRoutes {
		covered[r.Endpoint] = true
	}
	for _, e := range api.Routes() {
		if strings.Contains(e.Path, "{code}") && !covered[e] {
			t.Errorf("%s %s names a voucher but caseRoutes does not send it a code in lower case", e.Method, e.Path)
		}
	}
	forBothPaths(t, func(t *testing.T, flash bool) {
		b := backendtest.Start(t, backendtest.Config(t))
		now := time.Now()
		for _, r := range caseRoutes {
			body := any(r.body)
			if r.Path == "/admin/vouchers" && r.Method == "POST" {
				body = map[string]any{"code": "case-1", "discountAmount": 10, "totalLimit": 5,
					"startsAt": now.Add(-time.Minute), "endsAt": now.Add(time.Hour), "flashSale": flash}
			} else if r.body == "" {
				body = nil
			}
			status, answer := b.Do(t, r.Method, r.uri, body)
			if status != r.status {
				t.Errorf("%s %s: %d %s; want %d", r.Method, r.uri, status, answer, r.status)
			}
			if strings.Contains(strings.ToLower(string(answer)), "case-1") && !strings.Contains(string(answer), "CASE-1") ||
				r.names && !strings.Contains(string(answer), `"CASE-1"`) {
				t.Errorf("%s %s answered %s; want the code as stored, CASE-1", r.Method, r.uri, answer)
			}
		}
		v := viewOf(t, b, "CASE-1")
		if v.Code != "CASE-1" || v.TotalLimit != 7 || v.Counts[wire.StatusRefunded] != 1 {
			t.Errorf("the voucher after every route: %+v", v)
		}
		b.CheckInvariants(t, "CASE-1", nil)
	})
}

// An edit on one backend is what every backend's next reservation gets, at once: the other
// backend's copy of the voucher is a moment old, and the path that takes the use (the flash
// gate's definition, the normal path's lookup) names the revision it holds, so the reservation
// is decided again with the edited voucher. A retry keeps what it was given.
func TestAnEditReachesEveryBackendsNextReservation(t *testing.T) {
	forBothPaths(t, func(t *testing.T, flash bool) {
		cfg := backendtest.Config(t)
		b1, b2 := backendtest.Start(t, cfg), backendtest.Start(t, cfg)
		b1.CreateVoucher(t, backendtest.Voucher{Code: "EVERY", Discount: 10, TotalLimit: 50, PerUserLimit: 10, FlashSale: flash})
		if a := reserve(t, b2, "EVERY", "c", "before", 1000); a.status != 201 || a.discount != 10 {
			t.Fatalf("before the edit: %+v", a)
		}
		for i, change := range []struct {
			body     map[string]any
			discount int64
		}{
			{map[string]any{"discountAmount": 50}, 50},
			{map[string]any{"discountPercent": 20, "maxDiscountAmount": 150}, 150},
			{map[string]any{"maxDiscountAmount": nil}, 200},
		} {
			mustEdit(t, b1, "EVERY", change.body)
			order := fmt.Sprintf("after-%d", i)
			if a := reserve(t, b2, "EVERY", "c", order, 1000); a.status != 201 || a.discount != change.discount {
				t.Errorf("the other backend's next reservation after %v: %+v; want %d off", change.body, a, change.discount)
			}
		}
		if a := reserve(t, b2, "EVERY", "c", "before", 1000); a.discount != 10 {
			t.Errorf("a retry of the order made before the edits: %+v; want its 10 off", a)
		}
		b1.CheckInvariants(t, "EVERY", []string{"before", "after-0", "after-1", "after-2"})
	})
}
