package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// patchMembers are the members a PATCH body may name, by their names on the wire.
var patchMembers = []string{"discountAmount", "discountPercent", "maxDiscountAmount", "minOrderAmount", "totalLimit",
	"perUserLimit", "startsAt", "endsAt", "active", "holdTtl", "code", "flashSale"}

// stdDecodePatch reads a PATCH body independently of decodeVoucherPatch: it walks the object's
// members with encoding/json's tokenizer, matches each name to a member without regard to case
// (as encoding/json does, the last of repeated ones counting) and checks the rules the admin API
// documents for each.
func stdDecodePatch(body []byte) (voucher.Edit, error) {
	var e voucher.Edit
	if !utf8.Valid(body) {
		return e, errors.New("not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return e, errors.New("not an object")
	}
	members := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return e, err
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return e, err
		}
		known := ""
		for _, m := range patchMembers {
			if strings.EqualFold(m, name) {
				known = m
			}
		}
		if known == "" {
			return e, fmt.Errorf("unknown member %q", name)
		}
		// every value must fit its member's type, also one a later repetition replaces
		if err := fits(known, raw); err != nil {
			return e, err
		}
		members[known] = raw
	}
	if _, err := dec.Token(); err != nil {
		return e, err
	}
	if len(bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")) != 0 {
		return e, errors.New("trailing data")
	}
	if _, ok := members["code"]; ok {
		return e, errors.New("code")
	}
	if _, ok := members["flashSale"]; ok {
		return e, errors.New("flashSale")
	}
	null := func(m string) bool { return string(members[m]) == "null" }
	for m := range members {
		if null(m) && m != "maxDiscountAmount" && m != "holdTtl" {
			return e, fmt.Errorf("%s null", m)
		}
	}
	read := func(m string, dst any) bool {
		raw, ok := members[m]
		if ok && !null(m) {
			_ = json.Unmarshal(raw, dst)
		}
		return ok && !null(m)
	}
	var amount, maxAmount, minOrder int64
	var percent, total, perUser int
	var active bool
	var starts, ends, hold string
	if read("discountAmount", &amount) {
		e.DiscountAmount = &amount
	}
	if read("discountPercent", &percent) {
		e.DiscountPercent = &percent
	}
	if read("maxDiscountAmount", &maxAmount) {
		e.MaxDiscountAmount = &maxAmount
	}
	e.NoMaxDiscount = members["maxDiscountAmount"] != nil && null("maxDiscountAmount")
	if read("minOrderAmount", &minOrder) {
		e.MinOrderAmount = &minOrder
	}
	if read("totalLimit", &total) {
		e.TotalLimit = &total
	}
	if read("perUserLimit", &perUser) {
		e.PerUserLimit = &perUser
	}
	if read("active", &active) {
		e.Active = &active
	}
	for _, tm := range []struct {
		member string
		s      *string
		dst    **time.Time
	}{{"startsAt", &starts, &e.StartsAt}, {"endsAt", &ends, &e.EndsAt}} {
		if read(tm.member, tm.s) {
			at, err := time.Parse(time.RFC3339, *tm.s)
			if err != nil {
				return e, err
			}
			*tm.dst = &at
		}
	}
	if members["holdTtl"] != nil {
		var d time.Duration
		if read("holdTtl", &hold) {
			var err error
			if d, err = time.ParseDuration(hold); err != nil || strings.TrimSpace(hold) != hold ||
				d < time.Second || d > 24*time.Hour || d%time.Millisecond != 0 {
				return e, errors.New("holdTtl")
			}
		}
		e.HoldTTL = &d
	}
	switch {
	case e == voucher.Edit{},
		e.DiscountAmount != nil && (e.DiscountPercent != nil || e.MaxDiscountAmount != nil),
		e.StartsAt != nil && e.EndsAt != nil && !e.EndsAt.After(*e.StartsAt),
		e.DiscountAmount != nil && *e.DiscountAmount < 0,
		e.DiscountPercent != nil && (*e.DiscountPercent < 1 || *e.DiscountPercent > 100),
		e.MaxDiscountAmount != nil && *e.MaxDiscountAmount < 0,
		e.MinOrderAmount != nil && *e.MinOrderAmount < 0,
		e.TotalLimit != nil && (*e.TotalLimit < 0 || *e.TotalLimit > 10_000_000),
		e.PerUserLimit != nil && (*e.PerUserLimit < 1 || *e.PerUserLimit > 1000):
		return e, errors.New("out of bounds")
	}
	return e, nil
}

// fits reports whether raw, not null, is a value of member's type.
func fits(member string, raw json.RawMessage) error {
	if string(raw) == "null" {
		return nil
	}
	var dst any
	switch member {
	case "discountAmount", "maxDiscountAmount", "minOrderAmount":
		dst = new(int64)
	case "discountPercent", "totalLimit", "perUserLimit":
		dst = new(int)
	case "active":
		dst = new(bool)
	case "startsAt", "endsAt", "holdTtl":
		dst = new(string)
	default:
		return nil // code, flashSale: refused by name whatever they hold
	}
	return json.Unmarshal(raw, dst)
}

// go test -fuzz=FuzzDecodeVoucherPatch ./backend/api: decodeVoucherPatch takes exactly the
// bodies the independent reading takes, and reads the same edit from them.
func FuzzDecodeVoucherPatch(f *testing.F) {
	for _, s := range []string{
		`{"totalLimit":200}`, `{"active":false}`, `{"discountPercent":15,"maxDiscountAmount":500}`, `{"maxDiscountAmount":null}`,
		`{"holdTtl":"90s"}`, `{"holdTtl":null}`, `{"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00+08:00"}`,
		`{"TOTALLIMIT":5,"totalLimit":6}`, `{"totalLimit":"5"}`, `{"totalLimit":5.0}`, `{"flashSale":true}`, `{"code":"X"}`,
		`{}`, `[]`, `{"totalLimit":1} {}`, `{"discountAmount":1,"discountPercent":2}`, `{"perUserLimit":null}`,
		`{"holdTtl":" 1s"}`, `{"ſtartsAt":"2026-01-01T00:00:00Z"}`, `{"totalLimit":1,"totalLimit":"x"}`, `{"minOrderAmount":-1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := decodeVoucherPatch(body)
		want, stdErr := stdDecodePatch(body)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("%q: decodeVoucherPatch says %v, the independent reading %v", body, err, stdErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeVoucherPatch read %s, the independent reading %s", body, describeEdit(got), describeEdit(want))
		}
	})
}

func describeEdit(e voucher.Edit) string {
	b, _ := json.Marshal(e)
	return string(b)
}

// go test -fuzz=FuzzVoucherQuery ./backend/api: the vouchers list's query is taken exactly when
// net/url finds each parameter at most once, all known, with values the rules allow, and reads
// what net/url reads (after a code in any case, upper-cased).
func FuzzVoucherQuery(f *testing.F) {
	for _, s := range []string{"", "limit=10&after=ABC&active=true&ended=false", "after=abc", "active=1", "ended=TRUE",
		"active=true&active=true", "x=1", "after=%C5%BF", "limit=0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		var args fasthttp.Args
		args.Parse(query)
		got, limit, err := voucherQuery(&args)
		vals, perr := url.ParseQuery(query)
		if perr != nil {
			return // net/url refuses bad escapes and ';', which fasthttp reads its own way
		}
		if vs, given := vals[""]; given && strings.Join(vs, "") == "" {
			delete(vals, "")
		}
		ok := true
		for name, vs := range vals {
			ok = ok && len(vs) == 1
			switch v := vs[0]; name {
			case "limit":
				n, serr := strconv.Atoi(v)
				ok = ok && serr == nil && n >= 1 && n <= wire.MaxPageLimit
			case "after":
				ok = ok && wire.ValidCode(strings.Map(asciiUpper, v))
			case "active", "ended":
				ok = ok && (v == "true" || v == "false")
			default:
				ok = false
			}
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
		flag := func(name string) *bool {
			if v, given := vals[name]; given {
				b := v[0] == "true"
				return &b
			}
			return nil
		}
		if got.After != strings.Map(asciiUpper, vals.Get("after")) || !reflect.DeepEqual(got.Active, flag("active")) ||
			!reflect.DeepEqual(got.Ended, flag("ended")) || (vals.Get("limit") == "" && limit != wire.DefaultPageLimit) {
			t.Errorf("%q: decoded limit %d %+v; net/url reads %v", query, limit, got, vals)
		}
	})
}

func asciiUpper(r rune) rune {
	if r >= 'a' && r <= 'z' {
		return r - 'a' + 'A'
	}
	return r
}
