package quota_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/quota"
	"vouchergate/testkit"

	"golang.org/x/sync/errgroup"
)

// TestMemoryPerQuotaIdentityAndIdemKey deducts through the real service (rules "a day" and "a
// week" on ITEM:1001 in Asia/Shanghai, limits too high to reach, as the benchmarks use) into the
// shared Redis, then reads MEMORY USAGE of every key it wrote and sums it by kind: counters
// (":c:"), an identity's record of an idemKey (":i:") and anything else (a request's own record,
// when one is kept). Two series: N identities deducting once each (the slope is what one more
// customer costs for the window's life), and one identity deducting N times with N idemKeys
// (the slope is what one more deduct costs for the idemKey TTL). It asserts only that the
// figures are sane, never a time.
//
//	go test -run TestMemoryPer -v ./backend/quota
func TestMemoryPerQuotaIdentityAndIdemKey(t *testing.T) {
	e := &env{db: migratedDB(t), clock: testkit.NewManualClock(time.Date(2025, 3, 5, 10, 0, 0, 0, time.UTC))}
	e.rdb = singleRedis(t)
	prefix := "scaling-mem-" + testkit.Name("q") + ":"
	e.cfg = quota.Config{Redis: e.rdb, DB: e.db, KeyPrefix: prefix, NATSPrefix: testkit.NATSPrefix(),
		Clock: e.clock, IdemTTL: 7 * 24 * time.Hour}
	t.Cleanup(func() { testkit.UnlinkPrefix(e.rdb, prefix) })
	e.svc = e.start(t, e.cfg)
	e.rule(t, 1, "USER", "ITEM:1001", 1e15, calendar(t, quota.Day, "Asia/Shanghai"))
	e.rule(t, 1, "USER", "ITEM:1001", 1e15, calendar(t, quota.Week, "Asia/Shanghai"))

	for _, series := range []string{"identities", "idemkeys"} {
		for _, n := range []int{1, 1000, 10000} {
			run := map[string]string{"identities": "u", "idemkeys": "k"}[series] + strconv.Itoa(n)
			deductMany(t, e.svc, n, func(i int) (string, string) {
				idem := "idem-" + run + "-" + strconv.Itoa(100000000+i) // 20-odd characters, as a checkout's key
				if series == "identities" {
					return strconv.Itoa(n*1000 + i), idem // a numeric user id, 4–8 digits, apart for each n
				}
				return "1999999" + strconv.Itoa(n), idem
			})
			sum := sumByKind(t, e, prefix, run)
			t.Logf("%s n=%-6d counters: %d keys %d B | idem records: %d keys %d B | other: %d keys %d B",
				series, n, sum.keys["c"], sum.bytes["c"], sum.keys["i"], sum.bytes["i"], sum.keys["o"], sum.bytes["o"])
			perIdem := float64(sum.bytes["i"]+sum.bytes["o"]) / float64(n)
			if series == "identities" {
				perID := float64(sum.bytes["c"]) / float64(n)
				t.Logf("%s n=%-6d per identity: %.1f B of counters (%d per identity), %.1f B of idemKey records per deduct",
					series, n, perID, sum.keys["c"]/n, perIdem)
				if perID < 10 || perID > 1000 {
					t.Errorf("%.1f bytes of counters per identity: not between 10 and 1,000", perID)
				}
			} else {
				t.Logf("%s n=%-6d per idemKey: %.1f B of records; the identity's counters %d B in all",
					series, n, perIdem, sum.bytes["c"])
			}
			if perIdem < 10 || perIdem > 2000 {
				t.Errorf("%.1f bytes of records per idemKey: not between 10 and 2,000", perIdem)
			}
		}
	}
}

// deductMany runs n deducts of 1 on ITEM:1001, deduct i by the user and idemKey that who(i) names.
func deductMany(t *testing.T, svc *quota.Service, n int, who func(i int) (user, idem string)) {
	t.Helper()
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			user, idem := who(i)
			items := []quota.Item{{IdentityType: "USER", Identity: user, Dimensions: []string{"ITEM:1001"}, Amount: 1}}
			_, err := svc.Deduct(context.Background(), 1, idem, items)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

type kindSums struct{ keys, bytes map[string]int }

// sumByKind sums MEMORY USAGE (every element counted) of the keys that run's deducts wrote:
// those naming its idemKeys, and the counters of its identities.
func sumByKind(t *testing.T, e *env, prefix, run string) kindSums {
	t.Helper()
	ctx := context.Background()
	s := kindSums{keys: map[string]int{}, bytes: map[string]int{}}
	seen := map[string]bool{}
	var names []string
	iter := e.rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if !seen[k] {
			seen[k] = true
			names = append(names, k)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	// The identities of this run: those whose record names one of its idemKeys.
	ids := map[string]bool{}
	for _, k := range names {
		if i := strings.Index(k, "}:i:idem-"+run+"-"); i >= 0 {
			ids[k[:i+2]] = true
		}
	}
	for _, k := range names {
		kind := ""
		switch {
		case strings.Contains(k, ":i:idem-"+run+"-"):
			kind = "i"
		case strings.Contains(k, "idem-"+run+"-"):
			kind = "o"
		case strings.Contains(k, "}:c:") && ids[k[:strings.Index(k, "}:c:")+2]]:
			kind = "c"
		default:
			continue
		}
		b, err := e.rdb.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			t.Fatalf("MEMORY USAGE %s: %v", k, err)
		}
		s.keys[kind]++
		s.bytes[kind] += int(b)
	}
	return s
}
