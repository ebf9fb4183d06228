package gate_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"vouchergate/backend/gate"
	"vouchergate/backend/voucher"
	"vouchergate/shared/keys"
	"vouchergate/testkit"
)

// TestMemoryPerVoucherAndHolder loads flash vouchers into the shared Redis through the real
// gate (load.lua, then reserve.lua once per order), with 0, 1, 1,000 and 10,000 holders, and
// logs MEMORY USAGE of each of the voucher's keys, so that the bytes a voucher costs and the
// bytes each held order adds can be read off (docs/SCALING.md). Holders look like a sale's:
// a numeric customerId up to 10,000,000, a 36-character orderId, the gate's own holder format.
// It asserts only that the figures are sane, never a time.
//
//	go test -run TestMemoryPer -v ./backend/gate
func TestMemoryPerVoucherAndHolder(t *testing.T) {
	opts, err := redis.ParseURL(testkit.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	opts.PoolSize = 16
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	prefix := "scaling-mem-" + testkit.Name("g") + ":"
	t.Cleanup(func() { testkit.UnlinkPrefix(rdb, prefix) })
	g := gate.New(rdb, prefix)

	for _, name := range []string{"hash-max-listpack-entries", "hash-max-listpack-value"} {
		v, err := rdb.ConfigGet(ctx, name).Result()
		if err == nil {
			t.Logf("redis %s = %s", name, v[name])
		}
	}

	var base int64
	for _, n := range []int{0, 1, 1000, 10000} {
		code := "MEM" + strconv.Itoa(n)
		v := voucher.Voucher{Code: code, TotalLimit: 1_000_000, PerUserLimit: 1}
		if _, err := g.Load(ctx, v, nil); err != nil {
			t.Fatal(err)
		}
		reserveMany(t, g, v, n)
		k := keys.ForVoucher(prefix, code)
		sizes := map[string]int64{}
		var total int64
		for _, key := range k.List() {
			b, err := rdb.MemoryUsage(ctx, key, 0).Result() // SAMPLES 0: every element counted
			if err != nil && err != redis.Nil {
				t.Fatalf("MEMORY USAGE %s: %v", key, err)
			}
			sizes[key[len(prefix):]] = b
			total += b
		}
		enc, _ := rdb.ObjectEncoding(ctx, k.Orders).Result()
		t.Logf("holders=%-6d remaining=%d users=%d orders=%d version=%d total=%d bytes (orders encoding %s)",
			n, sizes[k.Remaining[len(prefix):]], sizes[k.Users[len(prefix):]], sizes[k.Orders[len(prefix):]],
			sizes[k.Version[len(prefix):]], total, enc)
		if n == 0 {
			base = total
			if base < 50 || base > 2000 {
				t.Errorf("an empty voucher takes %d bytes: not between 50 and 2,000", base)
			}
			continue
		}
		per := float64(total-base) / float64(n)
		t.Logf("holders=%-6d per held order: %.1f bytes (users hash %.1f per customer, orders hash %.1f per order)",
			n, per, float64(sizes[k.Users[len(prefix):]])/float64(n), float64(sizes[k.Orders[len(prefix):]])/float64(n))
		if n >= 1000 && (per < 10 || per > 1000) {
			t.Errorf("%d holders: %.1f bytes per holder, not between 10 and 1,000", n, per)
		}
	}
}

// reserveMany reserves n uses of v, each a new customer and order, through the gate.
func reserveMany(t *testing.T, g *gate.Gate, v voucher.Voucher, n int) {
	t.Helper()
	now := time.Now()
	var g8 errgroup.Group
	g8.SetLimit(8)
	for i := range n {
		g8.Go(func() error {
			customer := strconv.Itoa(1_000_000 + i*7) // a numeric customerId of 7–8 digits
			order := fmt.Sprintf("%08x-%04x-4000-8000-%012x", i, i%8, i)
			h := voucher.Holder{CustomerID: customer, ReservedAt: now, Attempt: "1a2b3c4d" + strconv.FormatUint(uint64(i), 36)}
			r, err := g.Reserve(context.Background(), v, order, h)
			if err == nil && r.Outcome != voucher.GateReserved {
				err = fmt.Errorf("order %s: outcome %v", order, r.Outcome)
			}
			return err
		})
	}
	if err := g8.Wait(); err != nil {
		t.Fatal(err)
	}
}
