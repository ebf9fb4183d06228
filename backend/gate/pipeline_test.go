package gate_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/gate"
	"vouchergate/backend/voucher"
	"vouchergate/shared/keys"
	"vouchergate/testkit"
)

// A crowd of reservations sent through the auto-pipeline: each script still runs atomically, so
// exactly total_limit are reserved, each customer at most per_user_limit times, and R1 holds;
// after Redis forgets its scripts (SCRIPT FLUSH, as after a restart) the next calls load them
// again. On one Redis and on a Redis Cluster, where a pipeline spans nodes.
func TestPipelinedReservationsStayAtomic(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		rdb, prefix := singleRedis(t)
		checkCrowd(t, rdb, prefix, func() error { return rdb.ScriptFlush(context.Background()).Err() })
	})
	t.Run("cluster", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a Redis Cluster")
		}
		cluster := testkit.StartRedisCluster(t)
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
		t.Cleanup(func() { rdb.Close() })
		checkCrowd(t, rdb, "", func() error {
			return rdb.ForEachShard(context.Background(), func(ctx context.Context, c *redis.Client) error {
				return c.ScriptFlush(ctx).Err()
			})
		})
	})
}

func checkCrowd(t *testing.T, rdb redis.UniversalClient, prefix string, flush func() error) {
	ctx := context.Background()
	g := gate.New(rdb, prefix)
	vouchers := []voucher.Voucher{{Code: "CROWD-A", TotalLimit: 100, PerUserLimit: 2}, {Code: "CROWD-B", TotalLimit: 50, PerUserLimit: 1}}
	for _, v := range vouchers {
		if _, err := g.Load(ctx, v, nil); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 2 {
		if round == 1 {
			if err := flush(); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := map[string]int{}
		for i := range 600 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := vouchers[i%2]
				r, err := g.Reserve(ctx, v, fmt.Sprintf("r%d-o%d", round, i), voucher.Holder{
					CustomerID: fmt.Sprintf("r%d-c%d", round, i%150), ReservedAt: time.Now(), Attempt: "a"})
				if err != nil {
					t.Error(err)
					return
				}
				if r.Outcome == voucher.GateReserved {
					mu.Lock()
					won[v.Code]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		for _, v := range vouchers {
			want := v.TotalLimit
			if round == 1 {
				want = 0 // sold out in round 0
			}
			if won[v.Code] != want {
				t.Errorf("round %d: %s reserved %d times; want %d", round, v.Code, won[v.Code], want)
			}
			k := keys.ForVoucher(prefix, v.Code)
			remaining, _ := rdb.Get(ctx, k.Remaining).Int()
			held, _ := rdb.HLen(ctx, k.Orders).Result()
			if remaining != 0 || int(held) != v.TotalLimit {
				t.Errorf("R1 %s: remaining %d + orders %d; want 0 + %d", v.Code, remaining, held, v.TotalLimit)
			}
		}
	}
}
