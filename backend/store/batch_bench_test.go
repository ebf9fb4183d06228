package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

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
