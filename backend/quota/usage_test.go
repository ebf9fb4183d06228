package quota_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/quota"
)

// Usage without a dimension lists every counter of the identity in its current windows: the
// rules that name their dimension (even at 0), and the wildcard rules' counters a deduct made,
// calendar and rolling, with the identity's override; a wildcard counter of an earlier period,
// or one rolled back to nothing, is not listed.
func TestUsageByIdentity(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
		day, roll := calendar(t, quota.Day, "UTC"), rolling(t, time.Hour)
		e.rule(t, 1, "USER", "ITEM:*", 5, day)
		e.rule(t, 1, "USER", "TYPE:*", 4, roll)
		e.rule(t, 1, "USER", "ITEM:9", 2, day)
		if _, _, err := e.svc.PutOverride(t.Context(), quota.Override{BizID: 1, IdentityType: "USER", Identity: "u",
			Dimension: "ITEM:*", Window: day, Limit: 8}); err != nil {
			t.Fatal(err)
		}
		usage := func() string {
			t.Helper()
			cs, err := e.svc.Usage(t.Context(), 1, "USER", "u", nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, c := range cs {
				got[c.Dimension+" "+c.Window.ID()] = fmt.Sprintf("%d/%d", c.Used, c.Limit)
			}
			return fmt.Sprint(got)
		}
		if got := usage(); got != "map[ITEM:9 DAY/UTC:0/2]" {
			t.Fatalf("before any deduct: %s", got)
		}
		if _, err := e.deduct(1, "a", item("USER", "u", 2, "ITEM:1", "TYPE:GAME"), item("USER", "u", 1, "ITEM:2")); err != nil {
			t.Fatal(err)
		}
		if _, err := e.deduct(1, "b", item("USER", "u", 1, "ITEM:3")); err != nil {
			t.Fatal(err)
		}
		if got, want := usage(), "map[ITEM:1 DAY/UTC:2/8 ITEM:2 DAY/UTC:1/8 ITEM:3 DAY/UTC:1/8 ITEM:9 DAY/UTC:0/2 TYPE:GAME ROLLING/3600000:2/4]"; got != want {
			t.Fatalf("after two deducts:\n got %s\nwant %s", got, want)
		}
		if _, err := e.svc.Rollback(t.Context(), 1, "b"); err != nil {
			t.Fatal(err)
		}
		if got, want := usage(), "map[ITEM:1 DAY/UTC:2/8 ITEM:2 DAY/UTC:1/8 ITEM:9 DAY/UTC:0/2 TYPE:GAME ROLLING/3600000:2/4]"; got != want {
			t.Fatalf("after rolling back ITEM:3:\n got %s\nwant %s", got, want)
		}
		e.clock.Advance(24 * time.Hour) // the next day: yesterday's and the last hour's are gone
		if _, err := e.deduct(1, "c", item("USER", "u", 1, "ITEM:4")); err != nil {
			t.Fatal(err)
		}
		if got, want := usage(), "map[ITEM:4 DAY/UTC:1/8 ITEM:9 DAY/UTC:0/2]"; got != want {
			t.Fatalf("the next day:\n got %s\nwant %s", got, want)
		}
	})
}
