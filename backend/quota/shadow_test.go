package quota_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/quota"
)

// shadowRule puts a rule in mode SHADOW.
func (e *env) shadowRule(t testing.TB, biz int64, typ, dim string, limit int64, w quota.Window) quota.Rule {
	t.Helper()
	r, _, err := e.svc.PutRule(t.Context(), quota.Rule{BizID: biz, IdentityType: typ, Dimension: dim, Limit: limit, Window: w, Mode: quota.Shadow})
	if err != nil {
		t.Fatalf("put shadow rule: %v", err)
	}
	return r
}

// A SHADOW rule counts like any other but never refuses: a deduct it would refuse passes and
// lists it in WouldExceed (a retry answers the same and is not counted again in the metric);
// putting the rule again as ENFORCE keeps what it counted and refuses from then on. A SHADOW rule
// sharing a counter with an ENFORCE rule reports its own lower limit, the ENFORCE one holds.
func TestShadowRulePassesWhatItWouldRefuse(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
		day := calendar(t, quota.Day, "UTC")
		shadow := e.shadowRule(t, 1, "USER", "ITEM:1", 2, day)

		var last quota.DeductResult
		for i := range 4 {
			res, err := e.deduct(1, fmt.Sprintf("s-%d", i), item("USER", "u", 1, "ITEM:1"))
			if err != nil {
				t.Fatalf("deduct %d under a SHADOW rule of 2: %v", i, err)
			}
			if len(res.Counters) != 1 || !res.Counters[0].Shadow || res.Counters[0].Limit != 2 || res.Counters[0].Used != int64(i+1) {
				t.Fatalf("deduct %d: counters %+v; want ITEM:1 at %d of the shadow limit 2", i, res.Counters, i+1)
			}
			wantWould := i >= 2
			if got := len(res.WouldExceed) == 1 && res.WouldExceed[0].RuleID == shadow.ID && res.WouldExceed[0].Counter.Limit == 2; got != wantWould ||
				(!wantWould && len(res.WouldExceed) != 0) {
				t.Fatalf("deduct %d: wouldExceed %+v; want the shadow rule %d listed: %v", i, res.WouldExceed, shadow.ID, wantWould)
			}
			last = res
		}
		if m := e.svc.Metrics(); m.WouldExceed != 2 {
			t.Fatalf("metrics count %d would-be refusals; want 2", m.WouldExceed)
		}
		again, err := e.deduct(1, "s-3", item("USER", "u", 1, "ITEM:1"))
		if err != nil || len(again.WouldExceed) != 1 || !sameWould(again.WouldExceed[0], last.WouldExceed[0]) {
			t.Fatalf("retry: %+v %v; want the first answer's wouldExceed %+v", again, err, last.WouldExceed)
		}
		if m := e.svc.Metrics(); m.WouldExceed != 2 {
			t.Fatalf("a replay counted again in the metric: %d", m.WouldExceed)
		}
		// the dry run says the same, changing nothing
		chk, err := e.svc.Check(t.Context(), 1, "s-4", []quota.Item{item("USER", "u", 1, "ITEM:1")})
		if err != nil || len(chk.WouldExceed) != 1 || chk.Counters[0].Used != 5 {
			t.Fatalf("check: %+v %v; want a pass at 5 that the shadow rule would refuse", chk, err)
		}

		// enforced from now on, on the counts it kept
		if _, _, err := e.svc.PutRule(t.Context(), quota.Rule{BizID: 1, IdentityType: "USER", Dimension: "ITEM:1", Limit: 5, Window: day, Mode: quota.Enforce}); err != nil {
			t.Fatal(err)
		}
		var ex *quota.ExceededError
		if _, err := e.deduct(1, "s-4", item("USER", "u", 2, "ITEM:1")); !errors.As(err, &ex) || ex.Counter.Used != 4 || ex.Counter.Limit != 5 {
			t.Fatalf("after ENFORCE: %v; want refused at 4 of 5", err)
		}
		if got := e.used(t, 1, "USER", "u", "ITEM:1", day); got != 4 {
			t.Fatalf("ITEM:1 at %d; want 4", got)
		}

		// a SHADOW wildcard sharing an ENFORCE rule's counter: the lower SHADOW limit reports
		e.shadowRule(t, 1, "USER", "ITEM:*", 1, day)
		res, err := e.deduct(1, "s-5", item("USER", "u", 1, "ITEM:1"))
		if err != nil || len(res.Counters) != 1 || res.Counters[0].Shadow || res.Counters[0].Limit != 5 ||
			len(res.WouldExceed) != 1 || res.WouldExceed[0].Counter.Limit != 1 || res.WouldExceed[0].Counter.Used != 5 {
			t.Fatalf("shared counter: %+v %v; want ITEM:1 at 5 of the enforced 5, the shadow 1 would refuse", res, err)
		}
		if _, err := e.deduct(1, "s-6", item("USER", "u", 1, "ITEM:1")); !errors.As(err, &ex) || ex.Counter.Limit != 5 {
			t.Fatalf("sixth: %v; want refused by the enforced 5", err)
		}
	})
}

func sameWould(a, b quota.WouldExceed) bool {
	return a.RuleID == b.RuleID && a.Counter.Dimension == b.Counter.Dimension && a.Counter.Window.ID() == b.Counter.Window.ID() &&
		a.Counter.Used == b.Counter.Used && a.Counter.Limit == b.Counter.Limit && a.Counter.Shadow == b.Counter.Shadow
}
