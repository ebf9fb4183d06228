package api_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"vouchergate/shared/wire"
)

// The whole flow over HTTP: rules, deduct, refusal, retry, usage, rollback, and the answers'
// shapes.
func TestQuotaFlowOverHTTP(t *testing.T) {
	c, clock := startQuotas(t, t0, nil)

	a := do(t, c, "POST", "/admin/quota-rules", dayRule)
	var rule wire.QuotaRule
	a.decode(t, &rule)
	if a.status != 201 || rule.ID == 0 || rule.Limit != 3 || rule.Window.Timezone != "Asia/Shanghai" {
		t.Fatalf("create rule: %d %s", a.status, a.body)
	}
	if a := do(t, c, "POST", "/admin/quota-rules", strings.Replace(dayRule, `"limit":3`, `"limit":2`, 1)); a.status != 200 {
		t.Fatalf("update rule: %d %s; want 200", a.status, a.body)
	}
	a = do(t, c, "POST", "/admin/quota-rules", `{"bizId":1,"identityType":"USER","dimension":"*","limit":10,"window":{"type":"ROLLING","size":"7d"}}`)
	if a.status != 201 || !strings.Contains(string(a.body), `"size":"168h"`) {
		t.Fatalf("rolling rule: %d %s", a.status, a.body)
	}
	var list wire.QuotaRules
	do(t, c, "GET", "/admin/quota-rules?bizId=1", "").decode(t, &list)
	if len(list.Rules) != 2 {
		t.Fatalf("list: %+v", list)
	}

	deduct := func(key string) reply {
		return do(t, c, "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"`+key+`","items":[{"identityType":"USER","identity":"12345","dimensions":["ITEM:1001","TYPE:GAME"]}]}`)
	}
	a = deduct("order-1")
	var res wire.QuotaDeductResponse
	a.decode(t, &res)
	if a.status != 200 || res.IdemKey != "order-1" || len(res.Counters) != 2 {
		t.Fatalf("deduct: %d %s", a.status, a.body)
	}
	for _, ct := range res.Counters {
		if ct.Used != 1 || ct.ResetsAt == nil {
			t.Fatalf("counter %+v; want used 1 with resetsAt", ct)
		}
		if ct.Window.Type == "DAY" && !ct.ResetsAt.Equal(time.Date(2025, 3, 3, 16, 0, 0, 0, time.UTC)) {
			t.Fatalf("day resetsAt %v; want Shanghai midnight", ct.ResetsAt)
		}
	}
	first := string(a.body)
	if a := deduct("order-2"); a.status != 200 {
		t.Fatalf("second deduct: %d %s", a.status, a.body)
	}
	a = deduct("order-3")
	var ex wire.QuotaExceeded
	a.decode(t, &ex)
	if a.status != 409 || ex.Error != wire.CodeQuotaExceeded || ex.Counter.Dimension != "ITEM:1001" ||
		ex.Counter.Used != 2 || ex.Counter.Limit != 2 || ex.Requested != 1 {
		t.Fatalf("over the limit: %d %s", a.status, a.body)
	}
	clock.Advance(time.Minute)
	if a := deduct("order-1"); a.status != 200 || string(a.body) != first {
		t.Fatalf("retry: %d %s; want the first answer %s", a.status, a.body, first)
	}

	var usage wire.QuotaUsageResponse
	do(t, c, "GET", "/quotas/usage?bizId=1&identityType=USER&identity=12345&dimension=ITEM:1001", "").decode(t, &usage)
	if len(usage.Counters) != 2 || usage.Counters[0].Used != 2 || usage.Counters[1].Used != 2 {
		t.Fatalf("usage: %+v", usage)
	}

	var rb wire.QuotaRollbackResponse
	a = do(t, c, "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"order-1"}`)
	a.decode(t, &rb)
	if a.status != 200 || len(rb.Returned) != 2 || rb.Returned[0].Amount != 1 {
		t.Fatalf("rollback: %d %s", a.status, a.body)
	}
	a = do(t, c, "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"order-1"}`)
	a.decode(t, &rb)
	if a.status != 200 || len(rb.Returned) != 0 {
		t.Fatalf("second rollback: %d %s; want nothing returned", a.status, a.body)
	}
	if a := deduct("order-1"); a.status != 409 || !strings.Contains(string(a.body), wire.CodeQuotaRolledBack) {
		t.Fatalf("deduct after rollback: %d %s", a.status, a.body)
	}
	if a := deduct("order-4"); a.status != 200 {
		t.Fatalf("deduct into the room given back: %d %s", a.status, a.body)
	}

	id := fmt.Sprint(rule.ID)
	if a := do(t, c, "GET", "/admin/quota-rules/"+id, ""); a.status != 200 || !strings.Contains(string(a.body), `"limit":2`) {
		t.Fatalf("get rule: %d %s", a.status, a.body)
	}
	if a := do(t, c, "DELETE", "/admin/quota-rules/"+id, ""); a.status != 200 {
		t.Fatalf("delete rule: %d %s", a.status, a.body)
	}
	if a := do(t, c, "DELETE", "/admin/quota-rules/"+id, ""); a.status != 404 || !strings.Contains(string(a.body), wire.CodeQuotaRuleNotFound) {
		t.Fatalf("delete again: %d %s", a.status, a.body)
	}
}

// Bad input gets a 4xx with a JSON error that names the problem, and changes nothing.
func TestQuotaBadInput(t *testing.T) {
	c, _ := startQuotas(t, t0, nil)
	if a := do(t, c, "POST", "/admin/quota-rules", dayRule); a.status != 201 {
		t.Fatalf("rule: %d %s", a.status, a.body)
	}
	itemWith := func(field string) string {
		return `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"u","dimensions":["ITEM:1001"]` + field + `}]}`
	}
	items := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = `{"identityType":"USER","identity":"u","dimensions":["ITEM:1"]}`
		}
		return `{"bizId":1,"idemKey":"k","items":[` + strings.Join(parts, ",") + `]}`
	}
	long := strings.Repeat("x", 65)
	dims := func(n int) string {
		ds := make([]string, n)
		for i := range ds {
			ds[i] = fmt.Sprintf(`"ITEM:%d"`, i)
		}
		return `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"u","dimensions":[` + strings.Join(ds, ",") + `]}]}`
	}
	rule := func(window string) string {
		return `{"bizId":1,"identityType":"USER","dimension":"ITEM:1","limit":1,"window":` + window + `}`
	}
	tests := []struct {
		name, method, uri, body string
		status                  int
		code, says              string
	}{
		{"empty body", "POST", "/quotas/deduct", "", 400, "BAD_REQUEST", "JSON body is required"},
		{"not JSON", "POST", "/quotas/deduct", "bizId=1", 400, "BAD_REQUEST", "not valid JSON"},
		{"cut short", "POST", "/quotas/deduct", `{"bizId":1,`, 400, "BAD_REQUEST", "ends early"},
		{"array", "POST", "/quotas/deduct", `[]`, 400, "BAD_REQUEST", "must be a JSON object"},
		{"bizId as string", "POST", "/quotas/deduct", `{"bizId":"1"}`, 400, "BAD_REQUEST", "bizId must not be string"},
		{"bizId fraction", "POST", "/quotas/deduct", `{"bizId":1.5}`, 400, "BAD_REQUEST", "bizId"},
		{"bizId huge", "POST", "/quotas/deduct", `{"bizId":99999999999999999999}`, 400, "BAD_REQUEST", "bizId"},
		{"bizId missing", "POST", "/quotas/deduct", `{"idemKey":"k","items":[]}`, 400, "BAD_REQUEST", "bizId must be a positive integer"},
		{"bizId negative", "POST", "/quotas/deduct", `{"bizId":-1,"idemKey":"k"}`, 400, "BAD_REQUEST", "bizId must be a positive integer"},
		{"idemKey missing", "POST", "/quotas/deduct", `{"bizId":1,"items":[]}`, 400, "BAD_REQUEST", "idemKey is required"},
		{"idemKey too long", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"` + long + `"}`, 400, "BAD_REQUEST", "idemKey is 65 bytes; at most 64"},
		{"idemKey with a brace", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"a}b","items":[]}`, 400, "BAD_REQUEST", "idemKey contains '}'"},
		{"idemKey with a newline", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"a\nb","items":[]}`, 400, "BAD_REQUEST", "control characters"},
		{"no items", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[]}`, 400, "BAD_REQUEST", "items must hold at least one item"},
		{"items null", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":null}`, 400, "BAD_REQUEST", "items must hold at least one item"},
		{"too many items", "POST", "/quotas/deduct", items(17), 400, "BAD_REQUEST", "items holds more than 16 items; at most 16"},
		{"items not an array", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":{}}`, 400, "BAD_REQUEST", "items must not be object"},
		{"identityType missing", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identity":"u","dimensions":["ITEM:1"]}]}`, 400, "BAD_REQUEST", "items[0].identityType is required"},
		{"identityType lower case", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"user","identity":"u","dimensions":["ITEM:1"]}]}`, 400, "BAD_REQUEST", "items[0].identityType \"user\" must match"},
		{"identity missing", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","dimensions":["ITEM:1"]}]}`, 400, "BAD_REQUEST", "items[0].identity is required"},
		{"identity too long", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"` + long + `","dimensions":["ITEM:1"]}]}`, 400, "BAD_REQUEST", "items[0].identity is 65 bytes; at most 64"},
		{"identity with a brace", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"{x","dimensions":["ITEM:1"]}]}`, 400, "BAD_REQUEST", "braces"},
		{"identity not UTF-8", "POST", "/quotas/deduct", "{\"bizId\":1,\"idemKey\":\"k\",\"items\":[{\"identityType\":\"USER\",\"identity\":\"\xff\",\"dimensions\":[\"ITEM:1\"]}]}", 400, "BAD_REQUEST", "not valid UTF-8"},
		{"no dimensions", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"u"}]}`, 400, "BAD_REQUEST", "items[0].dimensions must hold at least one"},
		{"too many dimensions", "POST", "/quotas/deduct", dims(9), 400, "BAD_REQUEST", "items.dimensions holds more than 8 dimensions; at most 8"},
		{"dimension too long", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"u","dimensions":["ITEM:` + long + `"]}]}`, 400, "BAD_REQUEST", "items[0].dimensions[0] is 70 bytes; at most 64"},
		{"dimension without a name", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"u","dimensions":["1001"]}]}`, 400, "BAD_REQUEST", "must be NAME:VALUE"},
		{"dimension wildcard", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"u","dimensions":["ITEM:*"]}]}`, 400, "BAD_REQUEST", "only for rules"},
		{"dimension twice", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"k","items":[{"identityType":"USER","identity":"u","dimensions":["ITEM:1","ITEM:1"]}]}`, 400, "BAD_REQUEST", "names \"ITEM:1\" twice"},
		{"amount zero", "POST", "/quotas/deduct", itemWith(`,"amount":0`), 400, "BAD_REQUEST", "items[0].amount must be from 1 to 1000000"},
		{"amount negative", "POST", "/quotas/deduct", itemWith(`,"amount":-2`), 400, "BAD_REQUEST", "items[0].amount must be from 1"},
		{"amount too large", "POST", "/quotas/deduct", itemWith(`,"amount":1000001`), 400, "BAD_REQUEST", "items[0].amount must be from 1"},
		{"amount as string", "POST", "/quotas/deduct", itemWith(`,"amount":"1"`), 400, "BAD_REQUEST", "items.amount must not be string"},
		{"unknown field", "POST", "/quotas/deduct", itemWith(`,"ammount":1`), 400, "BAD_REQUEST", `unknown field "ammount"`},
		{"two objects", "POST", "/quotas/deduct", itemWith(``) + `{}`, 400, "BAD_REQUEST", "data after the JSON object"},
		{"body too large", "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"` + strings.Repeat("k", 9000) + `"}`, 413, "PAYLOAD_TOO_LARGE", "at most 8192"},

		{"rollback without idemKey", "POST", "/quotas/rollback", `{"bizId":1}`, 400, "BAD_REQUEST", "idemKey is required"},
		{"rollback bizId zero", "POST", "/quotas/rollback", `{"bizId":0,"idemKey":"k"}`, 400, "BAD_REQUEST", "bizId must be a positive integer"},
		{"rollback unknown field", "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k","item":[]}`, 400, "BAD_REQUEST", `unknown field "item"`},
		{"partial rollback without rollbackKey", "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k","items":[]}`, 400, "BAD_REQUEST", "rollbackKey is required with items"},
		{"partial rollback without items", "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k","rollbackKey":"r"}`, 400, "BAD_REQUEST", "items are required with rollbackKey"},
		{"partial rollback of no item", "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k","rollbackKey":"r","items":[]}`, 400, "BAD_REQUEST", "items must hold at least one item"},
		{"partial rollback bad rollbackKey", "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k","rollbackKey":"r{1}","items":[{"identityType":"USER","identity":"u","dimensions":["ITEM:1"]}]}`, 400, "BAD_REQUEST", "braces"},
		{"partial rollback amount 0", "POST", "/quotas/rollback", `{"bizId":1,"idemKey":"k","rollbackKey":"r","items":[{"identityType":"USER","identity":"u","dimensions":["ITEM:1"],"amount":0}]}`, 400, "BAD_REQUEST", "amount must be from 1"},
		{"ops unknown opType", "POST", "/quotas/ops", `{"bizId":1,"opType":3,"idemKey":"k","opItems":null}`, 400, "BAD_REQUEST", "opType 3 is neither"},
		{"ops unmapped userInfoType", "POST", "/quotas/ops", `{"bizId":1,"opType":1,"idemKey":"k","opItems":[{"userInfoType":7,"userInfoId":"u","dimensions":["T_GAME"],"expireTime":0,"opNum":1}]}`, 400, "BAD_REQUEST", "opItems[0].userInfoType 7 is not a mapped identity type (1 = USER, 2 = DEVICE, 3 = PHONE)"},
		{"ops dimension without type", "POST", "/quotas/ops", `{"bizId":1,"opType":1,"idemKey":"k","opItems":[{"userInfoType":1,"userInfoId":"u","dimensions":["GAME"],"expireTime":0,"opNum":1}]}`, 400, "BAD_REQUEST", `opItems[0].dimensions[0] "GAME" must be TYPE_VALUE`},
		{"ops opNum 0", "POST", "/quotas/ops", `{"bizId":1,"opType":1,"idemKey":"k","opItems":[{"userInfoType":1,"userInfoId":"u","dimensions":["T_GAME"],"expireTime":0,"opNum":0}]}`, 400, "BAD_REQUEST", "opItems[0].opNum must be from 1"},
		{"ops bizId as a string", "POST", "/quotas/ops", `{"bizId":"1","opType":1,"idemKey":"k","opItems":null}`, 400, "BAD_REQUEST", "bizId must not be string"},
		{"ops unknown field", "POST", "/quotas/ops", `{"bizId":1,"opType":1,"idemKey":"k","opItems":null,"userId":5}`, 400, "BAD_REQUEST", `unknown field "userId"`},
		{"ops deduct of nothing", "POST", "/quotas/ops", `{"bizId":1,"opType":1,"idemKey":"k","opItems":null}`, 400, "BAD_REQUEST", "items must hold at least one item"},
		{"override without limit", "POST", "/admin/quota-overrides", `{"bizId":1,"identityType":"USER","identity":"u","dimension":"ITEM:1001","window":{"type":"DAY","timezone":"Asia/Shanghai"}}`, 400, "BAD_REQUEST", "limit is required"},
		{"override of no rule", "POST", "/admin/quota-overrides", `{"bizId":1,"identityType":"USER","identity":"u","dimension":"ITEM:2","limit":1,"window":{"type":"DAY","timezone":"Asia/Shanghai"}}`, 404, "QUOTA_RULE_NOT_FOUND", "no quota rule has this bizId"},
		{"override expired", "POST", "/admin/quota-overrides", `{"bizId":1,"identityType":"USER","identity":"u","dimension":"ITEM:1001","limit":1,"window":{"type":"DAY","timezone":"Asia/Shanghai"},"expiresAt":"2020-01-01T00:00:00Z"}`, 400, "BAD_REQUEST", "is not in the future"},
		{"override unknown", "GET", "/admin/quota-overrides/424242", "", 404, "QUOTA_OVERRIDE_NOT_FOUND", "no quota override"},
		{"overrides unknown parameter", "GET", "/admin/quota-overrides?user=1", "", 400, "BAD_REQUEST", `unknown query parameter "user"`},
		{"reset without identity", "POST", "/admin/quota-counters/reset", `{"bizId":1,"identityType":"USER"}`, 400, "BAD_REQUEST", "identity is required"},
		{"reset bad dimension", "POST", "/admin/quota-counters/reset", `{"bizId":1,"identityType":"USER","identity":"u","dimension":"1001"}`, 400, "BAD_REQUEST", "NAME:VALUE"},
		{"resets without bizId", "GET", "/admin/quota-counters/resets", "", 400, "BAD_REQUEST", "bizId is required"},
		{"resets identity alone", "GET", "/admin/quota-counters/resets?bizId=1&identity=u", "", 400, "BAD_REQUEST", "identityType and identity go together"},
		{"setting unknown", "POST", "/admin/quota-settings", `{"bizId":1,"whenUnavailable":"AJAR"}`, 400, "BAD_REQUEST", `whenUnavailable "AJAR" must be CLOSED or OPEN`},
		{"rule unknown mode", "POST", "/admin/quota-rules", `{"bizId":1,"identityType":"USER","dimension":"ITEM:1","limit":1,"window":{"type":"DAY","timezone":"UTC"},"mode":"DRY"}`, 400, "BAD_REQUEST", `mode "DRY" must be ENFORCE or SHADOW`},

		{"usage without bizId", "GET", "/quotas/usage?identityType=USER&identity=u", "", 400, "BAD_REQUEST", "bizId is required"},
		{"usage bizId not a number", "GET", "/quotas/usage?bizId=x&identityType=USER&identity=u", "", 400, "BAD_REQUEST", "bizId must be a positive integer"},
		{"usage without identity", "GET", "/quotas/usage?bizId=1&identityType=USER", "", 400, "BAD_REQUEST", "identity is required"},
		{"usage bad dimension", "GET", "/quotas/usage?bizId=1&identityType=USER&identity=u&dimension=" + url.QueryEscape("ITEM:{1}"), "", 400, "BAD_REQUEST", "braces"},
		{"usage too many dimensions", "GET", "/quotas/usage?bizId=1&identityType=USER&identity=u" + strings.Repeat("&dimension=ITEM:1", 9), "", 400, "BAD_REQUEST", "at most 8"},

		{"rule without limit", "POST", "/admin/quota-rules", `{"bizId":1,"identityType":"USER","dimension":"ITEM:1","window":{"type":"DAY","timezone":"UTC"}}`, 400, "BAD_REQUEST", "limit is required"},
		{"rule negative limit", "POST", "/admin/quota-rules", `{"bizId":1,"identityType":"USER","dimension":"ITEM:1","limit":-1,"window":{"type":"DAY","timezone":"UTC"}}`, 400, "BAD_REQUEST", "limit must be from 0"},
		{"rule without window", "POST", "/admin/quota-rules", `{"bizId":1,"identityType":"USER","dimension":"ITEM:1","limit":1}`, 400, "BAD_REQUEST", "window.type is required"},
		{"rule unknown window", "POST", "/admin/quota-rules", rule(`{"type":"YEAR"}`), 400, "BAD_REQUEST", `window.type "YEAR" is not`},
		{"rule day without zone", "POST", "/admin/quota-rules", rule(`{"type":"DAY"}`), 400, "BAD_REQUEST", "window.timezone is required"},
		{"rule unknown zone", "POST", "/admin/quota-rules", rule(`{"type":"WEEK","timezone":"Asia/Atlantis"}`), 400, "BAD_REQUEST", `"Asia/Atlantis" is not an IANA`},
		{"rule day with size", "POST", "/admin/quota-rules", rule(`{"type":"DAY","timezone":"UTC","size":"24h"}`), 400, "BAD_REQUEST", "takes only timezone"},
		{"rule rolling without size", "POST", "/admin/quota-rules", rule(`{"type":"ROLLING"}`), 400, "BAD_REQUEST", "window.size is required"},
		{"rule rolling bad size", "POST", "/admin/quota-rules", rule(`{"type":"ROLLING","size":"a day"}`), 400, "BAD_REQUEST", `window.size "a day" is not a duration`},
		{"rule rolling zero", "POST", "/admin/quota-rules", rule(`{"type":"ROLLING","size":"0s"}`), 400, "BAD_REQUEST", "from 1s"},
		{"rule fixed backwards", "POST", "/admin/quota-rules", rule(`{"type":"FIXED","start":"2025-11-12T00:00:00Z","end":"2025-11-11T00:00:00Z"}`), 400, "BAD_REQUEST", "must be after window.start"},
		{"rule fixed without end", "POST", "/admin/quota-rules", rule(`{"type":"FIXED","start":"2025-11-12T00:00:00Z"}`), 400, "BAD_REQUEST", "window.end are required"},
		{"rule fixed bad time", "POST", "/admin/quota-rules", rule(`{"type":"FIXED","start":"11/11/2025","end":"2025-11-12T00:00:00Z"}`), 400, "BAD_REQUEST", "RFC 3339"},
		{"rule lower-case dimension", "POST", "/admin/quota-rules", `{"bizId":1,"identityType":"USER","dimension":"item:1","limit":1,"window":{"type":"DAY","timezone":"UTC"}}`, 400, "BAD_REQUEST", "NAME:VALUE"},
		{"rule bizId zero", "POST", "/admin/quota-rules", `{"bizId":0,"identityType":"USER","dimension":"ITEM:1","limit":1,"window":{"type":"DAY","timezone":"UTC"}}`, 400, "BAD_REQUEST", "bizId must be a positive integer"},
		{"rule id not a number", "GET", "/admin/quota-rules/abc", "", 400, "BAD_REQUEST", "rule id must be a positive integer"},
		{"rule unknown", "GET", "/admin/quota-rules/424242", "", 404, "QUOTA_RULE_NOT_FOUND", "no quota rule"},
		{"delete unknown rule", "DELETE", "/admin/quota-rules/424242", "", 404, "QUOTA_RULE_NOT_FOUND", "no quota rule"},
		{"list bizId bad", "GET", "/admin/quota-rules?bizId=-3", "", 400, "BAD_REQUEST", "bizId must be a positive integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := do(t, c, tt.method, tt.uri, tt.body)
			var e wire.Error
			a.decode(t, &e)
			if a.status != tt.status || e.Error != tt.code || !strings.Contains(e.Message, tt.says) {
				t.Fatalf("%d %s; want %d %s saying %q", a.status, a.body, tt.status, tt.code, tt.says)
			}
		})
	}
	// none of them took anything
	var usage wire.QuotaUsageResponse
	do(t, c, "GET", "/quotas/usage?bizId=1&identityType=USER&identity=u&dimension=ITEM:1001", "").decode(t, &usage)
	if len(usage.Counters) != 1 || usage.Counters[0].Used != 0 {
		t.Fatalf("after bad input: %+v", usage)
	}
}
