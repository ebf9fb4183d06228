package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"vouchergate/backend/quota"
	"vouchergate/shared/wire"
)

// Bodies as the quota design's Java clients serialise a QuotaOpCmd (Jackson: every field, ints
// as numbers, unset lists as null), and their near misses.
var opSeeds = []string{
	`{"bizId":1,"opType":1,"idemKey":"order-77","opItems":[{"userInfoType":1,"userInfoId":"12345","dimensions":["T_GAME","P_ITEM_1001"],"expireTime":43200,"opNum":1}]}`,
	`{"bizId":1,"opType":2,"idemKey":"order-77","opItems":[{"userInfoType":3,"userInfoId":"13800138000","dimensions":["P_ITEM_1001"],"expireTime":0,"opNum":2}]}`,
	`{"bizId":1,"opType":2,"idemKey":"order-77","opItems":null}`, `{"bizId":1,"opType":2,"idemKey":"order-77","opItems":[]}`,
	`{"bizId":1,"opType":2,"idemKey":"k","opItems":[],"rollbackKey":"r"}`, `{"bizId":1,"opType":1,"idemKey":"k","opItems":[],"rollbackKey":"r"}`,
	`{"bizId":1,"opType":3,"idemKey":"k","opItems":null}`, `{"bizId":1,"opType":1,"idemKey":"k","opItems":[{"userInfoType":9}]}`,
	`{"bizId":1,"opType":1,"idemKey":"k","opItems":[{"userInfoType":2,"userInfoId":"d","dimensions":["ITEM:1","GAME"],"opNum":1}]}`,
	`{"bizId":1,"opType":1,"idemKey":"k","opItems":[{"userInfoType":2,"userInfoId":"d","dimensions":null,"expireTime":-1,"opNum":0}]}`,
	`{"bizId":1,"opType":1,"idemKey":"k","opItems":[{"userInfoType":1,"userInfoId":"u","dimensions":["_X","X_"],"opNum":1000001}]}`,
	`{"bizId":"1","opType":1}`, `{"bizId":1.5}`, `{"opType":1e2}`, `{"opItems":[null]}`, `{"opItems":{}}`, `{"extra":1}`,
	`{"opItems":[{"userInfoId":1}]}`, `{"opItems":[{"expireTime":2147483648}]}`, `{"OPTYPE":1,"BizId":1,"IDEMKEY":"k"}`, `null`, `[]`, ``,
	`{"bizId":1,"opType":1,"idemKey":"k","opItems":[` + strings.Repeat(`{},`, 16) + `{}]}`,
}

var (
	opFields     = []string{"bizId", "opType", "idemKey", "opItems", "rollbackKey"}
	opItemFields = []string{"userInfoType", "userInfoId", "dimensions", "expireTime", "opNum"}
)

// decodeQuotaOp accepts exactly the bodies encoding/json accepts (strictly, as every quota body)
// whose numbers the default mapping knows, and reads them as the seed's model says: the result
// is the /quotas/deduct body an independent translation of the same command gives, read by that
// route's own decoder.
func FuzzDecodeQuotaOpMatchesEncodingJSON(f *testing.F) {
	for _, s := range append(opSeeds, quotaSeeds...) {
		f.Add(s)
	}
	m := wire.DefaultQuotaOpMapping()
	f.Fuzz(func(t *testing.T, body string) {
		got, err := decodeQuotaOp([]byte(body), &m)
		var cmd wire.QuotaOpCmd
		if stdErr := stdStrict([]byte(body), &cmd, opFields, "opItems", opItemFields); stdErr != nil {
			if err == nil {
				t.Fatalf("%q: decodeQuotaOp read %+v; encoding/json refuses it: %v", body, got, stdErr)
			}
			inOurWords(t, body, err)
			return
		}
		want, problem := translateOp(t, cmd)
		if problem != "" {
			if err == nil {
				t.Fatalf("%q: decodeQuotaOp read %+v; the command has %s", body, got, problem)
			}
			if !strings.Contains(err.Error(), problem) {
				t.Fatalf("%q: refused with %q; want it to name %s", body, err, problem)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: refused with %v; the command maps to %+v", body, err, want)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeQuotaOp read %+v; want %+v", body, got, want)
		}
	})
}

// translateOp is the oracle: the operation the seed's command asks, under the default mapping
// written out here, its items read by /quotas/deduct's decoder from the body it translates to;
// or the field that cannot be mapped.
func translateOp(t *testing.T, cmd wire.QuotaOpCmd) (quotaOp, string) {
	ops := map[int64]opKind{1: opDeduct, 2: opRollback}
	types := map[int64]string{1: "USER", 2: "DEVICE", 3: "PHONE"}
	kind, ok := ops[cmd.OpType]
	switch {
	case !ok:
		return quotaOp{}, "opType"
	case kind == opDeduct && cmd.RollbackKey != "":
		return quotaOp{}, "rollbackKey"
	case len(cmd.OpItems) > wire.MaxQuotaItems:
		return quotaOp{}, "opItems"
	}
	op := quotaOp{kind: kind, bizID: cmd.BizID, idemKey: cmd.IdemKey, rollbackKey: cmd.RollbackKey}
	if kind == opRollback && len(cmd.OpItems) == 0 {
		if cmd.RollbackKey != "" {
			return quotaOp{}, "rollbackKey"
		}
		return op, ""
	}
	deduct := wire.QuotaDeductRequest{BizID: cmd.BizID, IdemKey: cmd.IdemKey, Items: make([]wire.QuotaItem, len(cmd.OpItems))}
	for i, it := range cmd.OpItems {
		typ, ok := types[it.UserInfoType]
		switch {
		case !ok:
			return quotaOp{}, "userInfoType"
		case it.ExpireTime < 0 || it.ExpireTime > 1<<31-1:
			return quotaOp{}, "expireTime"
		case it.OpNum < 1 || it.OpNum > wire.MaxQuotaAmount:
			return quotaOp{}, "opNum"
		case len(it.Dimensions) > wire.MaxItemDimensions:
			return quotaOp{}, "dimensions"
		}
		dims := make([]string, len(it.Dimensions))
		for j, d := range it.Dimensions {
			name, value, found := strings.Cut(d, "_")
			switch {
			case strings.Contains(d, ":"):
				dims[j] = d
			case !found || name == "" || value == "":
				return quotaOp{}, "dimensions"
			default:
				dims[j] = name + ":" + value
			}
		}
		amount := it.OpNum
		deduct.Items[i] = wire.QuotaItem{IdentityType: typ, Identity: it.UserInfoID, Dimensions: dims, Amount: &amount}
	}
	b, err := json.Marshal(deduct)
	if err != nil {
		t.Fatal(err)
	}
	_, items, err := decodeDeduct(b, readDeduct)
	if err != nil {
		t.Fatalf("the translation %s: %v", b, err)
	}
	op.items = items
	if kind == opRollback && op.rollbackKey == "" {
		op.rollbackKey = quota.PartialKey(items)
	}
	return op, ""
}

// The admin bodies of overrides, resets and settings are read by decodeJSON as encoding/json
// reads them, strictly: the same bodies accepted, the same values read, refusals in the API's
// words.
func FuzzDecodeQuotaAdminBodiesMatchEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"bizId":1,"identityType":"USER","identity":"vip-1","dimension":"ITEM:*","window":{"type":"DAY","timezone":"Asia/Shanghai"},"limit":10,"expiresAt":"2026-12-31T00:00:00+08:00"}`,
		`{"bizId":1,"identityType":"USER","identity":"42","dimension":"ITEM:1001"}`, `{"bizId":1,"whenUnavailable":"OPEN"}`,
		`{"limit":null,"expiresAt":null}`, `{"window":{"size":1}}`, `{"expiresAt":"tomorrow"}`, `{"dimension":7}`,
	} {
		f.Add(s)
	}
	for _, s := range quotaSeeds {
		f.Add(s)
	}
	// the reference: UTF-8, json.Unmarshal (no trailing data), and encoding/json's own
	// DisallowUnknownFields at every depth (the window is an object of its own)
	std := func(body []byte, dst any) error {
		if !utf8.Valid(body) {
			return errors.New("not UTF-8")
		}
		if err := json.Unmarshal(body, dst); err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		return dec.Decode(reflect.New(reflect.TypeOf(dst).Elem()).Interface())
	}
	check := func(t *testing.T, body string, got, want any) {
		t.Helper()
		err := decodeJSON([]byte(body), got, strict)
		stdErr := std([]byte(body), want)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("%q into %T: decodeJSON says %v, encoding/json says %v", body, got, err, stdErr)
		}
		if err != nil {
			inOurWords(t, body, err)
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeJSON read %+v, encoding/json %+v", body, got, want)
		}
	}
	f.Fuzz(func(t *testing.T, body string) {
		check(t, body, &wire.QuotaOverrideRequest{}, &wire.QuotaOverrideRequest{})
		check(t, body, &wire.QuotaResetRequest{}, &wire.QuotaResetRequest{})
		check(t, body, &wire.QuotaSettingRequest{}, &wire.QuotaSettingRequest{})
	})
}
