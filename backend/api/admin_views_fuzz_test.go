package api

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/wire"
)

// The redemption list's query decoder against net/url, read independently: a query is taken
// exactly when net/url finds each parameter at most once, all of them known, with values the
// rules allow; what it takes is what net/url read; a refusal names a parameter the query has.
func FuzzRedemptionQuery(f *testing.F) {
	for _, s := range []string{
		"", "limit=10", "limit=500&after=123&status=RELEASED&customerId=42", "customerId=a%2Bb",
		"limit=0", "after=-1", "status=reserved", "customerId=", "customerId=%FF", "x=1", "limit=1&limit=1",
		"customerId=a+b", "limit=%31%30", "&&limit=3&", "status", "=1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		var args fasthttp.Args
		args.Parse(query)
		got, limit, err := redemptionQuery(&args)

		vals, perr := url.ParseQuery(query)
		if vs, given := vals[""]; given && strings.Join(vs, "") == "" {
			delete(vals, "") // a bare "=" is nothing: fasthttp skips it
		}
		ok := perr == nil
		for name, vs := range vals {
			ok = ok && len(vs) == 1
			v := vs[0]
			switch name {
			case "limit":
				n, err := strconv.Atoi(v)
				ok = ok && err == nil && n >= 1 && n <= wire.MaxPageLimit
			case "after":
				n, err := strconv.ParseInt(v, 10, 64)
				ok = ok && err == nil && n >= 1
			case "status":
				ok = ok && (v == wire.StatusReserved || v == wire.StatusConfirmed || v == wire.StatusReleased || v == wire.StatusRefunded)
			case "customerId":
				ok = ok && wire.CheckID("customerId", v, wire.MaxCustomerLen) == nil
			default:
				ok = false
			}
		}
		if perr != nil {
			return // net/url refuses bad escapes and ';', which fasthttp reads its own way
		}
		if (err == nil) != ok {
			t.Fatalf("%q: decoder err %v; net/url reads %v, acceptable %v", query, err, vals, ok)
		}
		if err != nil {
			if !namesAny(err.Error(), query) {
				t.Errorf("%q: refused with %q, which names no parameter of it", query, err)
			}
			return
		}
		wantLimit := wire.DefaultPageLimit
		if v, given := vals["limit"]; given {
			wantLimit, _ = strconv.Atoi(v[0])
		}
		wantAfter := int64(0)
		if v, given := vals["after"]; given {
			wantAfter, _ = strconv.ParseInt(v[0], 10, 64)
		}
		if limit != wantLimit || got.After != wantAfter || got.Status != vals.Get("status") || got.CustomerID != vals.Get("customerId") {
			t.Errorf("%q: decoded limit %d %+v; net/url reads %v", query, limit, got, vals)
		}
	})
}

// namesAny reports whether msg names a parameter of query: its name as sent or decoded,
// quoted (as unknown or repeated names are) or as it is.
func namesAny(msg, query string) bool {
	for _, kv := range strings.Split(query, "&") {
		name, _, _ := strings.Cut(kv, "=")
		names := []string{name}
		if dec, err := url.QueryUnescape(name); err == nil {
			names = append(names, dec)
		}
		for _, n := range names {
			if strings.Contains(msg, clip(n)) || strings.Contains(msg, strconv.Quote(clip(n))) {
				return true
			}
		}
	}
	return false
}
