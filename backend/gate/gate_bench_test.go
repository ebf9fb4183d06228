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

func benchReserve(b *testing.B, total, parallelism int) {
	rdb := client(b)
	g := gate.New(rdb, testkit.RedisPrefix(b))
	ctx := context.Background()
	v := voucher.Voucher{Code: "BENCH", TotalLimit: total, PerUserLimit: 1}
	if _, err := g.Load(ctx, v, nil); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	now := time.Now()
	cpu0 := redisCPU(b, rdb)
	b.ResetTimer()
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := strconv.FormatInt(n.Add(1), 10)
			if _, err := g.Reserve(ctx, v, "o"+id, voucher.Holder{CustomerID: "c" + id, ReservedAt: now, Attempt: "b"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64((redisCPU(b, rdb)-cpu0).Nanoseconds())/1e3/float64(b.N), "redis-µs/op")
}

func redisCPU(b *testing.B, rdb *redis.Client) time.Duration {
	used, err := testkit.RedisCPU(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	return used
}

// BenchmarkReserveWinning: every call takes a use (the limit is never reached).
func BenchmarkReserveWinning(b *testing.B) { benchReserve(b, 1<<30, 1) }

// BenchmarkReserveSoldOut: every call finds none left, the flood after a sell-out.
func BenchmarkReserveSoldOut(b *testing.B) { benchReserve(b, 0, 1) }

// BenchmarkReserveWinningCrowd: every call takes a use, 32 callers per CPU at once, as a
// sale's opening sends them: the auto-pipeline carries many of them in one call of the script.
func BenchmarkReserveWinningCrowd(b *testing.B) { benchReserve(b, 1<<30, 32) }
