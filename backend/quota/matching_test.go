package quota_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"vouchergate/backend/quota"
)

// Which counters an item counts toward: an exact rule and a wildcard rule of the same window
// share one counter (the lower limit holds, the item counts once); "ITEM:*" counts each item on
// its own; "*" counts every item of the identity together, once per item; other business lines
// and identity types are not touched.
func TestRuleMatching(t *testing.T) {
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC))
	day := calendar(t, quota.Day, "UTC")
	e.rule(t, 1, "USER", "ITEM:1", 2, day)
	e.rule(t, 1, "USER", "ITEM:*", 3, day)
	e.rule(t, 1, "USER", "*", 6, day)
	e.rule(t, 2, "USER", "*", 1, day)
	e.rule(t, 1, "DEVICE", "*", 1, day)

	n := 0
	buy := func(dims ...string) error {
		n++
		_, err := e.deduct(1, fmt.Sprintf("m-%d", n), item("USER", "u", 1, dims...))
		return err
	}
	for i := range 2 {
		if err := buy("ITEM:1", "TYPE:GAME"); err != nil {
			t.Fatalf("ITEM:1 #%d: %v", i, err)
		}
	}
	var ex *quota.ExceededError
	if err := buy("ITEM:1"); !errors.As(err, &ex) || ex.Counter.Dimension != "ITEM:1" || ex.Counter.Limit != 2 {
		t.Fatalf("third ITEM:1: %v; want ITEM:1 full at the exact rule's 2", err)
	}
	for i := range 3 {
		if err := buy("ITEM:2"); err != nil {
			t.Fatalf("ITEM:2 #%d: %v", i, err)
		}
	}
	if err := buy("ITEM:2"); !errors.As(err, &ex) || ex.Counter.Dimension != "ITEM:2" || ex.Counter.Limit != 3 {
		t.Fatalf("fourth ITEM:2: %v; want ITEM:2 full at the wildcard's 3", err)
	}
	if err := buy("TYPE:GAME"); err != nil { // "*": 6th item of the day
		t.Fatal(err)
	}
	if err := buy("TYPE:BOOK"); !errors.As(err, &ex) || ex.Counter.Dimension != "*" || ex.Counter.Used != 6 {
		t.Fatalf("seventh item: %v; want \"*\" full at 6", err)
	}
	// the other business line and identity type kept their own counters
	if _, err := e.deduct(2, "other-biz", item("USER", "u", 1, "ITEM:1")); err != nil {
		t.Fatalf("bizId 2: %v", err)
	}
	if _, err := e.deduct(1, "device", item("DEVICE", "u", 1, "ITEM:1")); err != nil {
		t.Fatalf("DEVICE: %v", err)
	}
	// usage without a dimension lists every counter of the identity: the rules that name
	// theirs, and the wildcard's, one per item it counted (ITEM:1's shared with the exact rule)
	cs, err := e.svc.Usage(t.Context(), 1, "USER", "u", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, c := range cs {
		got[c.Dimension] = c.Used
	}
	if len(got) != 3 || got["ITEM:1"] != 2 || got["ITEM:2"] != 3 || got["*"] != 6 {
		t.Fatalf("usage: %v; want ITEM:1 at 2, ITEM:2 at 3 and * at 6", got)
	}
	// an item with no matching rule is not limited
	res, err := e.deduct(1, "free", item("USER", "u", 1, "GIFT:1"))
	if err == nil || !errors.Is(err, quota.ErrQuotaExceeded) {
		t.Fatalf("GIFT:1 still counts toward \"*\": %+v %v", res, err)
	}
	if res, err := e.deduct(1, "phone", item("PHONE", "p", 100, "ITEM:1")); err != nil || len(res.Counters) != 0 {
		t.Fatalf("PHONE has no rule: %+v %v; want taken with no counter", res, err)
	}
}
