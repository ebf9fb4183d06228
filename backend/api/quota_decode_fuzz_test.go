package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"vouchergate/shared/wire"
)

// The quota decoders' fuzz targets compare with encoding/json read another way: json.Unmarshal
// of the whole body (which refuses anything after the value itself) into the same struct, and
// a walk over the body's tokens for unknown fields, matched as encoding/json matches names.

var quotaSeeds = []string{
	`{"bizId":1,"idemKey":"order-77","items":[{"identityType":"USER","identity":"12345","dimensions":["ITEM:1001","TYPE:GAME"],"amount":1}]}`,
	` { "BIZID" : 7 , "idemkey":"k\u00e9\ud83d\ude00\ud800x\/" , "items" : [ null , {"amount":null,"Dimensions":null} ] } `,
	`{"items":[{"identity":"a","dimensions":["x","y"],"amount":5}],"items":[{"identity":"b"},{}]}`,
	`{"items":[{"dimensions":["a","b","c"]}],"items":[{"dimensions":[null,"z"]}]}`,
	`{"items":[{"zz":1}],"items":null}`, `{"items":[[{"zz":1}]]}`, `{"bizId":{"zz":1}}`,
	`{"bizId":-0}`, `{"bizId":01}`, `{"bizId":1.0}`, `{"bizId":1e3}`, `{"bizId":9223372036854775808}`, `{"bizId":-9223372036854775808}`,
	`{"bizId":"1"}`, `{"bizId":true}`, `{"bizId":null,"idemKey":null,"items":null}`, `null`, ` null `, `nul`, `[]`, `"x"`, `1`,
	`{"a":1}`, `{"bizId":1,}`, `{"bizId":1}x`, `{"bizId":1}{}`, `{"bizId":1}]`, `{"idemKey":"a\tb"}`, "{\"idemKey\":\"a\tb\"}",
	`{"idemKey":"\u00"}`, `{"idemKey":"\x"}`, `{"idemKey":"\ud83d\u0041"}`, `{"items":[{"amount":1},{"amount":2}],"items":[{}]}`,
	`{"items":[1]}`, `{"items":{}}`, `{"items":[{"dimensions":"ITEM:1"}]}`, `{"items":[{"amount":"1"}]}`, `{`, `{"bizId"`, `{"bizId":`,
	`{"ıtems":[]}`, `{"itemſ":[]}`, `{"idem\u212aey":"x"}`, "{\"idem\u212aey\":\"x\"}", `{"bizId":1}` + "\n", "{}\x00", "\x00{}", "{\"bizId\":1\x00}",
	"{\"idemKey\":\"\xff\"}", ``, ` `,
	`{"items":[` + strings.Repeat(`{},`, 16) + `{}]}`,
	`{"items":[{"dimensions":["1","2","3","4","5","6","7","8","9"]}]}`,
	`{"bizId":1,"idemKey":"order-77","rollbackKey":"refund-1","items":[{"identityType":"USER","identity":"12345","dimensions":["ITEM:1001"],"amount":1}]}`,
	`{"bizId":1,"idemKey":"k","rollbackKey":"","items":null}`, `{"rollbackKey":5}`, `{"items":[{"amount":1,"extra":2}],"rollbackKey":"r"}`,
}

var (
	deductFields   = []string{"bizId", "idemKey", "items"}
	itemFields     = []string{"identityType", "identity", "dimensions", "amount"}
	rollbackFields = []string{"bizId", "idemKey", "rollbackKey", "items"}
)

// stdStrict is the reference reading of a strict body into dst: UTF-8, json.Unmarshal, and
// no key that names none of fields (or of nested's fields, in the objects of the array under
// nested's key).
func stdStrict(body []byte, dst any, fields []string, nested string, nestedFields []string) error {
	if !utf8.Valid(body) {
		return errors.New("not UTF-8")
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return err
	}
	return unknownKeys(body, fields, nested, nestedFields)
}

// unknownKeys walks a valid JSON body's tokens, checking the keys of the top object and of the
// objects directly in the array under nested. encoding/json matches a name exactly, else by
// Unicode case folding, which strings.EqualFold does.
func unknownKeys(body []byte, fields []string, nested string, nestedFields []string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	// path holds, per open object or array, '{' or '[' and, for an object, its current key
	type frame struct {
		delim byte
		key   string
	}
	var path []frame
	expectKey := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{', '[':
				path = append(path, frame{delim: byte(tok)})
				expectKey = tok == '{'
				continue
			default:
				path = path[:len(path)-1]
			}
		case string:
			if expectKey {
				path[len(path)-1].key = tok
				var known []string
				switch {
				case len(path) == 1:
					known = fields
				case len(path) == 3 && path[1].delim == '[' && strings.EqualFold(path[0].key, nested):
					known = nestedFields
				}
				if known != nil && !containsFold(known, tok) {
					return errors.New("unknown field " + tok)
				}
				expectKey = false
				continue
			}
		}
		// a value ended: the enclosing object expects a key next
		expectKey = len(path) > 0 && path[len(path)-1].delim == '{'
	}
}

func containsFold(list []string, s string) bool {
	for _, f := range list {
		if strings.EqualFold(f, s) {
			return true
		}
	}
	return false
}

// decodeDeduct accepts what encoding/json accepts within the wire bounds, reads the same
// values, and words every refusal itself.
func FuzzDecodeDeductMatchesEncodingJSON(f *testing.F) {
	for _, s := range quotaSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got, _, err := decodeDeduct([]byte(body), readDeduct)
		var want wire.QuotaDeductRequest
		stdErr := stdStrict([]byte(body), &want, deductFields, "items", itemFields)
		if stdErr == nil && overBound(want) {
			if err == nil {
				t.Fatalf("%q: read %+v beyond the wire bounds", body, got)
			}
			return
		}
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("%q: decodeDeduct says %v, encoding/json says %v", body, err, stdErr)
		}
		if err != nil {
			inOurWords(t, body, err)
			sameWordsAsDecodeJSON(t, body, err)
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeDeduct read %+v, encoding/json %+v", body, got, want)
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

// inOurWords fails if a refusal is empty or in encoding/json's words rather than the API's.
func inOurWords(t *testing.T, body string, err error) {
	t.Helper()
	if msg := err.Error(); msg == "" || strings.Contains(msg, "json: ") || strings.Contains(msg, "Go struct") {
		t.Fatalf("%q: refused with %q; want a message naming the problem in the API's words", body, msg)
	}
}

// sameWordsAsDecodeJSON fails if the scanner names a field's problem (a wrong type, an unknown
// field) other than decodeJSON names the same body's. Both stop at the first such problem in
// the body; a syntax error anywhere wins in decodeJSON, so a body with one is not compared.
func sameWordsAsDecodeJSON(t *testing.T, body string, err error) {
	t.Helper()
	var req wire.QuotaDeductRequest
	stdErr := decodeJSON([]byte(body), &req, strict)
	fieldProblem := func(e error) bool {
		return e != nil && (strings.Contains(e.Error(), " must not be ") || strings.HasPrefix(e.Error(), "unknown field "))
	}
	if fieldProblem(err) && fieldProblem(stdErr) && err.Error() != stdErr.Error() {
		t.Fatalf("%q: the scanner says %q, decodeJSON %q", body, err, stdErr)
	}
}

func FuzzDecodeRollbackMatchesEncodingJSON(f *testing.F) {
	for _, s := range quotaSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var got, want wire.QuotaRollbackRequest
		err := decodeJSON([]byte(body), &got, strict)
		stdErr := stdStrict([]byte(body), &want, rollbackFields, "items", itemFields)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("%q: decodeJSON says %v, encoding/json says %v", body, err, stdErr)
		}
		if err != nil {
			inOurWords(t, body, err)
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeJSON read %+v, encoding/json %+v", body, got, want)
		}
	})
}

func BenchmarkDecodeDeduct(b *testing.B) {
	body := []byte(quotaSeeds[0])
	b.ReportAllocs()
	for range b.N {
		if _, _, err := decodeDeduct(body, readDeduct); err != nil {
			b.Fatal(err)
		}
	}
}
