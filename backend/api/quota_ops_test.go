package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// javaQuotaOpCmd and javaQuotaOpItem are seed 004's Java classes QuotaOpCmd and QuotaOpItem as
// Jackson serialises them by default: every field, in declaration order, under its own name;
// Java's int a 32-bit JSON number; a List never set is null.
type javaQuotaOpCmd struct {
	BizID   int32             `json:"bizId"`
	OpType  int32             `json:"opType"`
	IdemKey string            `json:"idemKey"`
	OpItems []javaQuotaOpItem `json:"opItems"`
}

type javaQuotaOpItem struct {
	UserInfoType int32    `json:"userInfoType"`
	UserInfoID   string   `json:"userInfoId"`
	Dimensions   []string `json:"dimensions"`
	ExpireTime   int32    `json:"expireTime"`
	OpNum        int32    `json:"opNum"`
}

func (c javaQuotaOpCmd) body(t testing.TB) string {
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// secondsToMidnight is what the seed's clients send as expireTime for a natural day: 86400 -
// now % 86400.
func secondsToMidnight(now time.Time) int32 { return int32(86400 - now.Unix()%86400) }

// The seed's clients call POST /quotas/ops with their QuotaOpCmd unchanged: opType 1 deducts as
// /quotas/deduct does (same rules, answers, idemKeys: the same request through either route is
// one), opType 2 with opItems gives back part (once per body: the same body again says it is
// a replay), without them the rest; a refusal is the deduct's 409. On a single Redis and on a
// cluster.
func TestSeedQuotaOpCmd(t *testing.T) {
	t.Run("single", func(t *testing.T) { seedQuotaOpCmd(t, nil) })
	t.Run("cluster", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a Redis Cluster")
		}
		cfg := backendtest.Config(t)
		cfg.RedisClusterAddrs = testkit.StartRedisCluster(t).Addrs()
		seedQuotaOpCmd(t, &cfg)
	})
}

func seedQuotaOpCmd(t *testing.T, cfg *config.Backend) {
	b, clock := startQuotas(t, t0, cfg)
	for _, r := range []string{
		`{"bizId":1,"identityType":"USER","dimension":"T:GAME","limit":3,"window":{"type":"DAY","timezone":"UTC"}}`,
		`{"bizId":1,"identityType":"PHONE","dimension":"P:*","limit":2,"window":{"type":"DAY","timezone":"UTC"}}`,
	} {
		if a := do(t, b, "POST", "/admin/quota-rules", r); a.status != 201 {
			t.Fatalf("rule: %d %s", a.status, a.body)
		}
	}
	ttl := secondsToMidnight(clock.Now())
	cmd := javaQuotaOpCmd{BizID: 1, OpType: 1, IdemKey: "order-77", OpItems: []javaQuotaOpItem{
		{UserInfoType: 1, UserInfoID: "12345", Dimensions: []string{"T_GAME"}, ExpireTime: ttl, OpNum: 2},
		{UserInfoType: 3, UserInfoID: "13800138000", Dimensions: []string{"P_ITEM_1001"}, ExpireTime: ttl, OpNum: 1},
	}}
	first := do(t, b, "POST", "/quotas/ops", cmd.body(t))
	var res wire.QuotaDeductResponse
	first.decode(t, &res)
	got := map[string]string{}
	for _, c := range res.Counters {
		got[c.IdentityType+" "+c.Identity+" "+c.Dimension] = fmt.Sprintf("%d/%d", c.Used, c.Limit)
	}
	if first.status != 200 || fmt.Sprint(got) != "map[PHONE 13800138000 P:ITEM_1001:1/2 USER 12345 T:GAME:2/3]" {
		t.Fatalf("the seed's deduct: %d %s", first.status, first.body)
	}
	// the same request through /quotas/deduct is the same deduct: its answer again
	same := do(t, b, "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"order-77","items":[`+
		`{"identityType":"PHONE","identity":"13800138000","dimensions":["P:ITEM_1001"],"amount":1},`+
		`{"identityType":"USER","identity":"12345","dimensions":["T:GAME"],"amount":2}]}`)
	if same.status != 200 || string(same.body) != string(first.body) {
		t.Fatalf("/quotas/deduct with the same request: %d %s; want the first answer %s", same.status, same.body, first.body)
	}
	if again := do(t, b, "POST", "/quotas/ops", cmd.body(t)); string(again.body) != string(first.body) {
		t.Fatalf("the seed's deduct again: %s; want the first answer", again.body)
	}
	over := javaQuotaOpCmd{BizID: 1, OpType: 1, IdemKey: "order-78", OpItems: []javaQuotaOpItem{
		{UserInfoType: 1, UserInfoID: "12345", Dimensions: []string{"T_GAME"}, ExpireTime: ttl, OpNum: 2}}}
	if a := do(t, b, "POST", "/quotas/ops", over.body(t)); a.status != 409 || !strings.Contains(string(a.body), `"error":"QUOTA_EXCEEDED"`) {
		t.Fatalf("over the limit: %d %s; want the deduct's 409", a.status, a.body)
	}

	// refund 1 of the 2 games: opType 2 with the item and its opNum, sent twice. Without a
	// rollbackKey the items name the refund, so the second is the first again (a retry, or a
	// second refund of the same item the client meant: it gives back nothing), and says so
	refund := javaQuotaOpCmd{BizID: 1, OpType: 2, IdemKey: "order-77", OpItems: []javaQuotaOpItem{
		{UserInfoType: 1, UserInfoID: "12345", Dimensions: []string{"T_GAME"}, ExpireTime: ttl, OpNum: 1}}}
	for i := range 2 {
		a := do(t, b, "POST", "/quotas/ops", refund.body(t))
		var rb wire.QuotaRollbackResponse
		a.decode(t, &rb)
		if a.status != 200 || len(rb.Returned) != 1 || rb.Returned[0].Dimension != "T:GAME" || rb.Returned[0].Amount != 1 ||
			rb.Replayed != (i == 1) || !strings.HasPrefix(rb.RollbackKey, "items-") {
			t.Fatalf("partial rollback, send %d: %d %s; want T:GAME's 1 under a rollbackKey named by the items, replayed the second time", i, a.status, a.body)
		}
	}
	usage := func(typ, id, dim string) int64 {
		var u wire.QuotaUsageResponse
		do(t, b, "GET", "/quotas/usage?bizId=1&identityType="+typ+"&identity="+id+"&dimension="+dim, "").decode(t, &u)
		if len(u.Counters) != 1 {
			t.Fatalf("usage of %s %s: %+v", typ, id, u)
		}
		return u.Counters[0].Used
	}
	if got := usage("USER", "12345", "T:GAME"); got != 1 {
		t.Fatalf("T:GAME at %d after refunding 1 of 2 (twice the same body); want 1", got)
	}
	// a second refund of the same item takes a rollbackKey of its own
	second := strings.Replace(refund.body(t), `"opItems"`, `"rollbackKey":"refund-2","opItems"`, 1)
	if a := do(t, b, "POST", "/quotas/ops", second); a.status != 200 || !strings.Contains(string(a.body), `"amount":1`) || strings.Contains(string(a.body), "replayed") {
		t.Fatalf("a second refund of the same item with its own rollbackKey: %d %s; want 1 more given back", a.status, a.body)
	}
	// the rest, as Jackson writes a rollback without items
	whole := javaQuotaOpCmd{BizID: 1, OpType: 2, IdemKey: "order-77"}
	if !strings.Contains(whole.body(t), `"opItems":null`) {
		t.Fatalf("not Jackson's form: %s", whole.body(t))
	}
	a := do(t, b, "POST", "/quotas/ops", whole.body(t))
	var rb wire.QuotaRollbackResponse
	a.decode(t, &rb)
	if a.status != 200 || len(rb.Returned) != 1 || rb.Returned[0].Dimension != "P:ITEM_1001" {
		t.Fatalf("whole rollback after the partials: %d %s; want P:ITEM_1001's 1 (T:GAME's 2 given back)", a.status, a.body)
	}
	if u, p := usage("USER", "12345", "T:GAME"), usage("PHONE", "13800138000", "P:ITEM_1001"); u != 0 || p != 0 {
		t.Fatalf("after the whole rollback: %d, %d", u, p)
	}
	if a := do(t, b, "POST", "/quotas/ops", cmd.body(t)); a.status != 409 || !strings.Contains(string(a.body), "QUOTA_ROLLED_BACK") {
		t.Fatalf("the rolled-back deduct sent again: %d %s", a.status, a.body)
	}
}

// The numbers are the operator's: VG_QUOTA_OP_TYPES and VG_QUOTA_USER_INFO_TYPES map them.
func TestQuotaOpNumbersConfigured(t *testing.T) {
	cfg := backendtest.Config(t)
	cfg.QuotaOpTypes, cfg.QuotaUserInfoTypes = "5=DEDUCT,6=ROLLBACK", "1=USER,9=ID_CARD"
	b, _ := startQuotas(t, t0, &cfg)
	if a := do(t, b, "POST", "/admin/quota-rules", `{"bizId":1,"identityType":"ID_CARD","dimension":"*","limit":1,"window":{"type":"DAY","timezone":"UTC"}}`); a.status != 201 {
		t.Fatalf("rule: %d %s", a.status, a.body)
	}
	cmd := javaQuotaOpCmd{BizID: 1, OpType: 5, IdemKey: "k", OpItems: []javaQuotaOpItem{{UserInfoType: 9, UserInfoID: "110101199003070000", Dimensions: []string{"P_ITEM_1"}, OpNum: 1}}}
	if a := do(t, b, "POST", "/quotas/ops", cmd.body(t)); a.status != 200 || !strings.Contains(string(a.body), `"identityType":"ID_CARD"`) {
		t.Fatalf("opType 5 with userInfoType 9: %d %s", a.status, a.body)
	}
	cmd.OpType, cmd.IdemKey = 1, "k2"
	if a := do(t, b, "POST", "/quotas/ops", cmd.body(t)); a.status != 400 || !strings.Contains(string(a.body), "5 = DEDUCT, 6 = ROLLBACK") {
		t.Fatalf("opType 1 when 5 deducts: %d %s; want 400 naming the mapping", a.status, a.body)
	}
	cmd.OpType, cmd.IdemKey = 6, "k"
	if a := do(t, b, "POST", "/quotas/ops", cmd.body(t)); a.status != 200 || !strings.Contains(string(a.body), `"amount":1`) {
		t.Fatalf("opType 6: %d %s; want the partial rollback", a.status, a.body)
	}
}
