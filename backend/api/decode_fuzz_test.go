package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"vouchergate/shared/wire"
)

// The decoders' fuzz targets compare with encoding/json, read independently: json.Unmarshal of
// the whole body (which refuses anything after the value) into plain Go types, and a customerId
// read as json.Number or string by stdCustomerID, not by wire.CustomerID.

// stdCustomerID is the reference reading of a customerId: null leaves it as it is (as for any
// string field), a string is taken as it is, a number must be a canonical integer that
// strconv.ParseInt takes as an int64, anything else is refused.
type stdCustomerID struct {
	id       string
	isNumber bool
}

var canonicalInteger = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

func (c *stdCustomerID) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		*c = stdCustomerID{id: v}
		return nil
	case json.Number:
		if !canonicalInteger.MatchString(string(v)) {
			return fmt.Errorf("customerId %s is not a non-negative integer", v)
		}
		if _, err := strconv.ParseInt(string(v), 10, 64); err != nil {
			return fmt.Errorf("customerId %s: %w", v, err)
		}
		*c = stdCustomerID{id: string(v), isNumber: true}
		return nil
	}
	return fmt.Errorf("customerId is a %T", v)
}

type stdReserve struct {
	CustomerID  stdCustomerID `json:"customerId"`
	OrderID     string        `json:"orderId"`
	OrderAmount *int64        `json:"orderAmount"`
}

// stdDecodeReserve reads body with encoding/json and reports whether it is a reservation the
// backend must take, checked here rather than by decodeReserve's code.
func stdDecodeReserve(body []byte) (stdReserve, error) {
	var r stdReserve
	if err := json.Unmarshal(body, &r); err != nil {
		return r, err
	}
	switch {
	case !stdID(r.CustomerID.id, wire.MaxCustomerLen):
		return r, errors.New("bad customerId")
	case !stdID(r.OrderID, wire.MaxOrderIDLen):
		return r, errors.New("bad orderId")
	case r.OrderAmount == nil || *r.OrderAmount < 0:
		return r, errors.New("bad orderAmount")
	}
	return r, nil
}

// stdID is the README's id rule, read from its words with the unicode package rather than by
// wire.CheckID: 1 to max bytes of valid UTF-8, no control character (unicode.IsControl: C0, DEL,
// C1), no '/', not "." or "..", and no U+FFFD, which encoding/json makes of bytes that are not
// UTF-8 and of lone surrogate escapes: json.Unmarshal has already replaced those here.
func stdID(s string, max int) bool {
	return s != "" && len(s) <= max && utf8.ValidString(s) && s != "." && s != ".." &&
		!strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError || r == '/' })
}

var reserveSeeds = []string{
	`{"customerId":"c1","orderId":"o1","orderAmount":100}`,
	`{"customerId":"c1","orderId":"o1","orderAmount":-1}`,
	`{"customerId":1,"orderId":"o1","orderAmount":100}`,
	`{"customerId":"1","orderId":"o1","orderAmount":100}`,
	`{"customerId":0,"orderId":"o1","orderAmount":0}`,
	`{"customerId":"042","orderId":"o1","orderAmount":1}`,
	`{"customerId":042,"orderId":"o1","orderAmount":1}`,
	`{"customerId":+42,"orderId":"o1","orderAmount":1}`,
	`{"customerId":4.2,"orderId":"o1","orderAmount":1}`,
	`{"customerId":42.0,"orderId":"o1","orderAmount":1}`,
	`{"customerId":1e3,"orderId":"o1","orderAmount":1}`,
	`{"customerId":1E+3,"orderId":"o1","orderAmount":1}`,
	`{"customerId":-1,"orderId":"o1","orderAmount":1}`,
	`{"customerId":-0,"orderId":"o1","orderAmount":1}`,
	`{"customerId":9223372036854775807,"orderId":"o1","orderAmount":1}`,
	`{"customerId":9223372036854775808,"orderId":"o1","orderAmount":1}`,
	`{"customerId":18446744073709551616,"orderId":"o1","orderAmount":1}`,
	`{"customerId":true,"orderId":"o1","orderAmount":1}`,
	`{"customerId":{},"orderId":"o1","orderAmount":1}`,
	`{"customerId":["1"],"orderId":"o1","orderAmount":1}`,
	`{"customerId":null,"orderId":"o1","orderAmount":1}`,
	`{"customerId":"a","customerId":null,"orderId":"o1","orderAmount":1}`,
	`{"customerId":7,"CUSTOMERID":"b","orderId":"o1","orderAmount":1}`,
	`{"customerId":"a\u00e9\ud800\/","orderId":"o1","orderAmount":1}`,
	"{\"customerId\":\"a\xffb\",\"orderId\":\"o1\",\"orderAmount\":1}",
	`{"customerId":"c1","orderId":"o/1","orderAmount":100}`,
	"{\"customerId\":\"c1\",\"orderId\":\"M-\xff\",\"orderAmount\":1}",
	"{\"customerId\":\"c1\",\"orderId\":\"M-\xfe\",\"orderAmount\":1}",
	`{"customerId":"c1","orderId":"M-\udcff","orderAmount":1}`,
	`{"customerId":"c1","orderId":"M-\ud83d\ude00","orderAmount":1}`,
	`{"customerId":"c1","orderId":"M-\ufffd","orderAmount":1}`,
	`{"customerId":"c\u0085","orderId":"M-\u0085","orderAmount":1}`,
	`{"customerId":"c1","orderId":"M-\u00a0","orderAmount":1}`,
	`{"customerId":".","orderId":".","orderAmount":1}`,
	`{"customerId":"..","orderId":"..","orderAmount":1}`,
	`{"customerId":"...","orderId":"...","orderAmount":1}`,
	`{"customerId":"\u0000","orderId":"o1","orderAmount":1e400}`,
	`{"customerId":1,"orderId":"o1","orderAmount":1}]`,
	`{"customerId":1,"orderId":"o1","orderAmount":1}}`,
	`{"customerId":1,"orderId":"o1","orderAmount":1} x`,
	`{"customerId":1,"orderId":"o1","orderAmount":1}{}`,
	"{\"customerId\":1,\"orderId\":\"o1\",\"orderAmount\":1} \t\r\n",
	"{\"customerId\":1,\"orderId\":\"o1\",\"orderAmount\":1}\f",
	"{\"customerId\":1,\"orderId\":\"o1\",\"orderAmount\":1}\x00",
	`[]`, `null`, ``, ` `, `{`, `{"orderAmount":9223372036854775808}`,
}

// go test -fuzz=FuzzDecodeReserve ./backend/api: decodeReserve accepts exactly the bodies
// encoding/json reads as a valid reservation, reads the same values, and takes a number and
// its decimal string for the same customerId.
func FuzzDecodeReserve(f *testing.F) {
	for _, s := range reserveSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeReserve(body)
		want, stdErr := stdDecodeReserve(body)
		if err != nil && err.Error() == "" {
			t.Fatal("refused without a message")
		}
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("%q: decodeReserve says %v, encoding/json says %v", body, err, stdErr)
		}
		if err != nil {
			return
		}
		if string(req.CustomerID) != want.CustomerID.id || req.OrderID != want.OrderID || *req.OrderAmount != *want.OrderAmount {
			t.Fatalf("%q: decodeReserve read %q %q %d, encoding/json %q %q %d", body,
				req.CustomerID, req.OrderID, *req.OrderAmount, want.CustomerID.id, want.OrderID, *want.OrderAmount)
		}
		sameCustomerEitherForm(t, req, want.CustomerID.isNumber)
	})
}

// sameCustomerEitherForm checks that req, decoded from a body whose customerId was a number
// (or a string), is decoded the same from its other form, when it has one.
func sameCustomerEitherForm(t *testing.T, req wire.ReserveRequest, wasNumber bool) {
	t.Helper()
	id := string(req.CustomerID)
	if !canonicalInteger.MatchString(id) {
		if wasNumber {
			t.Fatalf("customerId number read as %q, not its decimal string", id)
		}
		return
	}
	if _, err := strconv.ParseInt(id, 10, 64); err != nil {
		return // "9223372036854775808" is a string id; as a number it is refused
	}
	order, _ := json.Marshal(req.OrderID)
	for _, form := range []string{id, strconv.Quote(id)} {
		other := fmt.Sprintf(`{"customerId":%s,"orderId":%s,"orderAmount":%d}`, form, order, *req.OrderAmount)
		got, err := decodeReserve([]byte(other))
		if err != nil || got.CustomerID != req.CustomerID || got.OrderID != req.OrderID || *got.OrderAmount != *req.OrderAmount {
			t.Fatalf("customerId %s: %q decodes to %+v, %v; want %+v", form, other, got, err, req)
		}
	}
}

// stdDecodeVoucherSpec reads body with encoding/json and checks it as a voucher to create,
// independently of decodeVoucherSpec.
func stdDecodeVoucherSpec(body []byte) (wire.VoucherSpec, error) {
	var v wire.VoucherSpec
	if err := json.Unmarshal(body, &v); err != nil {
		return v, err
	}
	starts, err1 := time.Parse(time.RFC3339, v.StartsAt)
	ends, err2 := time.Parse(time.RFC3339, v.EndsAt)
	perUser := 1
	if v.PerUserLimit != nil {
		perUser = *v.PerUserLimit
	}
	var hold time.Duration
	var err3 error
	if v.HoldTTL != nil {
		hold, err3 = time.ParseDuration(*v.HoldTTL)
		if err3 == nil && (strings.TrimSpace(*v.HoldTTL) != *v.HoldTTL || hold < time.Second || hold > 24*time.Hour || hold%time.Millisecond != 0) {
			err3 = errors.New("bad holdTtl")
		}
	}
	switch {
	case err1 != nil || err2 != nil || err3 != nil:
		return v, errors.New("bad time")
	case !regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`).MatchString(v.Code):
		return v, errors.New("bad code")
	case (v.DiscountAmount == nil) == (v.DiscountPercent == nil):
		return v, errors.New("one discount")
	case v.DiscountAmount != nil && (*v.DiscountAmount < 0 || v.MaxDiscountAmount != nil):
		return v, errors.New("bad amount")
	case v.DiscountPercent != nil && (*v.DiscountPercent < 1 || *v.DiscountPercent > 100):
		return v, errors.New("bad percent")
	case v.MaxDiscountAmount != nil && *v.MaxDiscountAmount < 0, v.MinOrderAmount < 0:
		return v, errors.New("bad amount")
	case v.TotalLimit == nil || *v.TotalLimit < 0 || *v.TotalLimit > wire.MaxTotalLimit:
		return v, errors.New("bad totalLimit")
	case perUser < 1 || perUser > wire.MaxPerUserLimit:
		return v, errors.New("bad perUserLimit")
	case !ends.After(starts):
		return v, errors.New("ends before it starts")
	}
	v.Code = strings.ToUpper(v.Code) // ASCII only, as the pattern above holds
	return v, nil
}

// go test -fuzz=FuzzDecodeVoucherSpec ./backend/api: decodeVoucherSpec accepts exactly the
// bodies encoding/json reads as a valid voucher, and reads the same values.
func FuzzDecodeVoucherSpec(f *testing.F) {
	for _, s := range []string{
		`{"code":"A","discountAmount":1,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`,
		`{"code":"a","discountAmount":1,"totalLimit":-1,"perUserLimit":0,"startsAt":"x","endsAt":""}`,
		`{"code":"A","discountAmount":0,"minOrderAmount":5,"totalLimit":10000000,"perUserLimit":1000,"startsAt":"2026-01-01T00:00:00+08:00","endsAt":"2026-01-01T00:00:01+08:00","flashSale":true}`,
		`{"code":"A","discountAmount":1,"totalLimit":1,"perUserLimit":null,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}]`,
		`{"code":"A","discountAmount":1,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}}`,
		`{"code":"A","discountAmount":1.5,"totalLimit":1e1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`,
		`{"CODE":"A","DiscountAmount":1,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2026-01-01T00:00:00Z"}`,
		`{"code":"pct","discountPercent":15,"maxDiscountAmount":500,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z","active":false,"holdTtl":"90s"}`,
		`{"code":"A","discountPercent":15,"discountAmount":1,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`,
		`{"code":"A","discountAmount":1,"maxDiscountAmount":1,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z","holdTtl":"1ms"}`,
		`{"code":"ſ","discountPercent":101,"totalLimit":1,"startsAt":"2026-01-01T00:00:00Z","endsAt":"2027-01-01T00:00:00Z"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := decodeVoucherSpec(body)
		want, stdErr := stdDecodeVoucherSpec(body)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("%q: decodeVoucherSpec says %v, encoding/json says %v", body, err, stdErr)
		}
		if err != nil {
			return
		}
		got := v.VoucherSpec
		if want.PerUserLimit == nil {
			one := 1
			want.PerUserLimit = &one
		}
		if got.Code != want.Code || !reflect.DeepEqual(got.DiscountAmount, want.DiscountAmount) ||
			!reflect.DeepEqual(got.DiscountPercent, want.DiscountPercent) || !reflect.DeepEqual(got.MaxDiscountAmount, want.MaxDiscountAmount) ||
			got.MinOrderAmount != want.MinOrderAmount || *got.TotalLimit != *want.TotalLimit || *got.PerUserLimit != *want.PerUserLimit ||
			got.StartsAt != want.StartsAt || got.EndsAt != want.EndsAt || got.FlashSale != want.FlashSale ||
			!reflect.DeepEqual(got.Active, want.Active) || !reflect.DeepEqual(got.HoldTTL, want.HoldTTL) {
			t.Fatalf("%q: decodeVoucherSpec read %+v, encoding/json %+v", body, got, want)
		}
	})
}
