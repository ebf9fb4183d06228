package quotaapi

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"vouchergate/shared/wire"
)

var decodeSeeds = []string{
	`{"bizId":1,"idemKey":"order-77","items":[{"identityType":"USER","identity":"12345","dimensions":["ITEM:1001","TYPE:GAME"],"amount":1}]}`,
	` { "BIZID" : 7 , "idemkey":"k\u00e9\ud83d\ude00\ud800x\/" , "items" : [ null , {"amount":null,"Dimensions":null} ] } `,
	`{"items":[{"identity":"a","dimensions":["x","y"],"amount":5}],"items":[{"identity":"b"},{}]}`,
	`{"items":[{"dimensions":["a","b","c"]}],"items":[{"dimensions":[null,"z"]}]}`,
	`{"bizId":-0}`, `{"bizId":01}`, `{"bizId":1.0}`, `{"bizId":1e3}`, `{"bizId":9223372036854775808}`, `{"bizId":-9223372036854775808}`,
	`{"bizId":"1"}`, `{"bizId":true}`, `{"bizId":null,"idemKey":null,"items":null}`, `null`, ` null `, `nul`, `[]`, `"x"`, `1`,
	`{"a":1}`, `{"bizId":1,}`, `{"bizId":1}x`, `{"bizId":1}{}`, `{"bizId":1}]`, `{"idemKey":"a\tb"}`, "{\"idemKey\":\"a\tb\"}",
	`{"idemKey":"\u00"}`, `{"idemKey":"\x"}`, `{"idemKey":"\ud83d\u0041"}`, `{"items":[{"amount":1},{"amount":2}],"items":[{}]}`,
	`{"items":[1]}`, `{"items":{}}`, `{"items":[{"dimensions":"ITEM:1"}]}`, `{"items":[{"amount":"1"}]}`, `{`, `{"bizId"`, `{"bizId":`,
	`{"ıtems":[]}`, `{"itemſ":[]}`, `{"idem\u212aey":"x"}`, "{\"idem\u212aey\":\"x\"}", `{"bizId":1}` + "\n", "{}\x00", "\x00{}", "{\"bizId\":1\x00}",
}

// stdDecode is how encoding/json reads a deduct body, the reference for decodeDeduct.
func stdDecode(body string) (wire.QuotaDeductRequest, error) {
	var r wire.QuotaDeductRequest
	err := decodeJSON([]byte(body), &r)
	return r, err
}

// decodeDeduct accepts what encoding/json accepts and reads the same values.
func FuzzDecodeDeductMatchesEncodingJSON(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add(s)
	}
	f.Add(`{"items":[` + strings.Repeat(`{},`, 16) + `{}]}`)
	f.Add(`{"items":[{"dimensions":["1","2","3","4","5","6","7","8","9"]}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		if !utf8.ValidString(body) {
			return // the handler refuses it before decoding
		}
		var got wire.QuotaDeductRequest
		err := decodeDeduct([]byte(body), &got)
		want, stdErr := stdDecode(body)
		var de *decodeError
		if errors.As(err, &de) && de.bound {
			if stdErr == nil && !overBound(want) {
				t.Fatalf("%q: cut at a bound (%v), but encoding/json reads %+v within bounds", body, err, want)
			}
			return
		}
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("%q: decodeDeduct says %v, encoding/json says %v", body, err, stdErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeDeduct read %s, encoding/json %s", body, show(got), show(want))
		}
	})
}

func overBound(r wire.QuotaDeductRequest) bool {
	if len(r.Items) > wire.MaxQuotaItems {
		return true
	}
	for _, it := range r.Items {
		if len(it.Dimensions) > wire.MaxItemDimensions {
			return true
		}
	}
	return false
}

func show(r wire.QuotaDeductRequest) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(reflect.ValueOf(r).String()))
	for _, it := range r.Items {
		amount := "nil"
		if it.Amount != nil {
			amount = string(rune('0' + *it.Amount%10))
		}
		b.WriteString(" {" + it.IdentityType + "|" + it.Identity + "|" + strings.Join(it.Dimensions, ",") + "|" + amount + "}")
	}
	return b.String() + " " + r.IdemKey
}

func FuzzDecodeRollbackMatchesEncodingJSON(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if !utf8.ValidString(body) {
			return
		}
		var got, want wire.QuotaRollbackRequest
		err := decodeRollback([]byte(body), &got)
		stdErr := decodeJSON([]byte(body), &want)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("%q: decodeRollback says %v, encoding/json says %v", body, err, stdErr)
		}
		if err == nil && got != want {
			t.Fatalf("%q: decodeRollback read %+v, encoding/json %+v", body, got, want)
		}
	})
}

func BenchmarkDecodeDeduct(b *testing.B) {
	body := []byte(decodeSeeds[0])
	b.ReportAllocs()
	for range b.N {
		var r wire.QuotaDeductRequest
		if err := decodeDeduct(body, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeDeductEncodingJSON(b *testing.B) {
	body := []byte(decodeSeeds[0])
	b.ReportAllocs()
	for range b.N {
		var r wire.QuotaDeductRequest
		if err := decodeJSON(body, &r); err != nil {
			b.Fatal(err)
		}
	}
}
