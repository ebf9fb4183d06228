package store_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/backend/store"
	"vouchergate/backend/voucher"
)

// go test -run '^$' -bench ReserveMany -benchtime 2000x ./backend/store
// One batch of 32 new customers per op against one reservation per op (the single-row path),
// on the same voucher row: the database's side of group commit, without HTTP or Redis.
func BenchmarkReserveMany(b *testing.B) {
	for _, size := range []int{1, 32, 128} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s, _ := openStoreB(b)
			createVoucherB(b, s, "BENCH", 1<<30, 1)
			ctx := context.Background()
			now := time.Now()
			holds := make([]voucher.Hold, size)
			b.ResetTimer()
			for i := range b.N {
				for j := range holds {
					id := fmt.Sprintf("%d-%d", i, j)
					holds[j] = hold("BENCH", "c-"+id, "o-"+id, now)
				}
				var err error
				if size == 1 {
					_, err = s.Reserve(ctx, holds[0], now)
				} else {
					_, err = s.ReserveMany(ctx, "BENCH", holds)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/row")
		})
	}
}

// go test -run '^$' -bench ReserveAcrossVouchers -benchtime 400x ./backend/store
// Eight writers each commit batches of 32 new customers, all on one voucher's row (as eight
// backends writing one hot voucher) or each on a voucher of its own (a sale of many vouchers):
// rows/s is what the database takes from one voucher against many at once.
func BenchmarkReserveAcrossVouchers(b *testing.B) {
	const writers, size = 8, 32
	for _, vouchers := range []int{1, writers} {
		b.Run(fmt.Sprintf("vouchers=%d", vouchers), func(b *testing.B) {
			s, _ := openStoreB(b)
			for v := range vouchers {
				createVoucherB(b, s, fmt.Sprintf("V%d", v), 1<<30, 1)
			}
			ctx := context.Background()
			now := time.Now()
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					code := fmt.Sprintf("V%d", w%vouchers)
					holds := make([]voucher.Hold, size)
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						for j := range holds {
							id := fmt.Sprintf("%d-%d", i, j)
							holds[j] = hold(code, "c-"+id, "o-"+id, now)
						}
						if _, err := s.ReserveMany(ctx, code, holds); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// go test -run '^$' -bench FirstBatchOnAConnection -benchtime 30x -count 3 ./backend/store
// The first batch of 32 holds on a new connection whose hot statements are prepared (what Warm
// did before it rehearsed them) against one whose statements were also rehearsed (what Warm
// does): the PostgreSQL server process's first-run costs, paid under the voucher's row lock or
// before the backend serves.
func BenchmarkFirstBatchOnAConnection(b *testing.B) {
	for _, c := range []struct {
		name     string
		rehearse bool
	}{{"prepared", false}, {"rehearsed", true}} {
		b.Run(c.name, func(b *testing.B) {
			_, migrated := openStoreB(b)
			createVoucherB(b, store.New(migrated), "FIRST", 1<<30, 1)
			ctx := context.Background()
			now := time.Now()
			holds := make([]voucher.Hold, 32)
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				pool, err := store.Open(ctx, migrated.Config().ConnString(), 1)
				if err != nil {
					b.Fatal(err)
				}
				conn, err := pool.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := store.ReadyConn(ctx, conn.Conn(), c.rehearse); err != nil {
					b.Fatal(err)
				}
				conn.Release()
				for j := range holds {
					id := fmt.Sprintf("%d-%d", i, j)
					holds[j] = hold("FIRST", "c-"+id, "o-"+id, now)
				}
				b.StartTimer()
				out, err := store.New(pool).ReserveMany(ctx, "FIRST", holds)
				b.StopTimer()
				if err != nil || out[0].Err != nil {
					b.Fatalf("the first batch: %v %v", err, out[0].Err)
				}
				pool.Close()
				b.StartTimer()
			}
		})
	}
}
