package gate_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/gate"
	"vouchergate/backend/voucher"
	"vouchergate/testkit"
)

// go test -run '^$' -bench . -benchmem ./backend/gate
// The reservation script against a PING on the same client and server, in the same run: the
// ratio is what the script costs beyond a round trip.

func client(b *testing.B) *redis.Client {
	opts, err := redis.ParseURL(testkit.RedisURL)
	if err != nil {
		b.Fatal(err)
	}
	opts.PoolSize = 64
	rdb := redis.NewClient(opts)
	b.Cleanup(func() { rdb.Close() })
	return rdb
}

func BenchmarkBaselinePing(b *testing.B) {
	rdb := client(b)
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := rdb.Ping(ctx).Err(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchReserve(b *testing.B, total int) {
	rdb := client(b)
	g := gate.New(rdb, testkit.RedisPrefix(b))
	ctx := context.Background()
	v := voucher.Voucher{Code: "BENCH", TotalLimit: total, PerUserLimit: 1}
	if _, err := g.Load(ctx, v, nil); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	now := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := strconv.FormatInt(n.Add(1), 10)
			if _, err := g.Reserve(ctx, v, "o"+id, voucher.Holder{CustomerID: "c" + id, ReservedAt: now, Attempt: "b"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkReserveWinning: every call takes a use (the limit is never reached).
func BenchmarkReserveWinning(b *testing.B) { benchReserve(b, 1<<30) }

// BenchmarkReserveSoldOut: every call finds none left, the flood after a sell-out.
func BenchmarkReserveSoldOut(b *testing.B) { benchReserve(b, 0) }
