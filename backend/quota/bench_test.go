package quota_test

import (
	"context"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/quota"
	"vouchergate/lua"
	"vouchergate/testkit"
)

// benchClients is how many deducts run at once in the benchmarks, as many concurrent
// checkouts would: enough to keep Redis busy on this 2-core machine.
const benchClients = 64

// benchEnv is a service whose rules never refuse: "3 a day, 10 a week" of the item and "30 a
// month of each item" (ITEM:*, a wildcard rule, so each deduct also notes its counter in the
// identity's index, as a platform's rules do) with limits too high to reach, so every deduct
// runs the whole script and takes.
func benchEnv(b *testing.B, rdb redis.UniversalClient) *env {
	e := newEnv(b, time.Date(2025, 3, 5, 10, 0, 0, 0, time.UTC), rdb)
	e.rule(b, 1, "USER", "ITEM:1001", 1e15, calendar(b, quota.Day, "Asia/Shanghai"))
	e.rule(b, 1, "USER", "ITEM:1001", 1e15, calendar(b, quota.Week, "Asia/Shanghai"))
	e.rule(b, 1, "USER", "ITEM:*", 1e15, calendar(b, quota.Month, "Asia/Shanghai"))
	return e
}

// benchRedis starts a Redis of its own for a benchmark, so that its INFO counts only this
// benchmark's work and the shared one is left alone: a single server or a three-master cluster.
func benchRedis(b *testing.B, kind string) redis.UniversalClient {
	if kind == "single" {
		srv := testkit.StartRedis(b)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 2 * benchClients})
		b.Cleanup(func() { rdb.Close() })
		return rdb
	}
	c := testkit.StartRedisCluster(b)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: 2 * benchClients})
	b.Cleanup(func() { rdb.Close() })
	return rdb
}

var runID atomic.Int64

// deductItems returns the items of deduct number i: one identity, or one of 100,000.
func deductItems(many bool, i int64) []quota.Item {
	id := "bench"
	if many {
		id = "u" + strconv.FormatInt(i%100000, 10)
	}
	return []quota.Item{{IdentityType: "USER", Identity: id, Dimensions: []string{"ITEM:1001"}, Amount: 1}}
}

// BenchmarkDeduct measures deducts per second through the service (rules, keys, one script
// call per identity), on one hot identity and on many, on a single Redis and a cluster.
func BenchmarkDeduct(b *testing.B) {
	for _, kind := range []string{"single", "cluster"} {
		b.Run(kind, func(b *testing.B) {
			e := benchEnv(b, benchRedis(b, kind))
			for _, many := range []bool{false, true} {
				name := "one-identity"
				if many {
					name = "many-identities"
				}
				b.Run(name, func(b *testing.B) {
					run := runID.Add(1)
					var seq atomic.Int64
					b.ReportAllocs()
					b.SetParallelism(benchClients / 2) // 2 cores here
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							i := seq.Add(1)
							key := "b" + strconv.FormatInt(run, 10) + "-" + strconv.FormatInt(i, 10)
							if _, err := e.svc.Deduct(context.Background(), 1, key, deductItems(many, i)); err != nil {
								b.Error(err)
								return
							}
						}
					})
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deducts/s")
				})
			}
		})
	}
}

// BenchmarkVersusRedisBenchmark runs, on the same server in the same run, redis-benchmark
// sending the deduct script's own EVALSHA (one identity, the same keys and arguments, a fresh
// idemKey each time) and then the same number of deducts through the service, and reports
// the medians of both rates and of their ratio over benchRounds rounds. Run it with
// -benchtime 1x.
func BenchmarkVersusRedisBenchmark(b *testing.B) {
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		b.Skip("redis-benchmark is not installed")
	}
	const n = 50000
	for _, kind := range []string{"single", "cluster"} {
		b.Run(kind, func(b *testing.B) {
			rdb := benchRedis(b, kind)
			e := benchEnv(b, rdb)
			keys, args, err := e.svc.DeductScriptCall(1, "rb-__rand_int__", deductItems(false, 0))
			if err != nil {
				b.Fatal(err)
			}
			cmd := testkit.EvalSHA(lua.QuotaDeduct, keys, args)
			var addr string
			if cc, ok := rdb.(*redis.ClusterClient); ok {
				// the identity's keys live on one master: drive that one, as the service does
				node, err := cc.MasterForKey(context.Background(), cmd[3])
				if err != nil {
					b.Fatal(err)
				}
				addr = node.Options().Addr
			} else {
				addr = rdb.(*redis.Client).Options().Addr
			}
			if err := lua.QuotaDeduct.Load(context.Background(), rdb).Err(); err != nil {
				b.Fatal(err)
			}
			day := calendar(b, quota.Day, "Asia/Shanghai")
			for range b.N {
				var theirs, ours, ratios, theirCPU, ourCPU []float64
				for range benchRounds {
					before := e.used(b, 1, "USER", "bench", "ITEM:1001", day)
					cpu0 := redisCPU(b, rdb)
					t := testkit.RedisBenchmark(b, addr, benchClients, n, cmd)
					cpu1 := redisCPU(b, rdb)
					// a few random idemKeys repeat (-r draws from 2^31): those are replays
					if took := e.used(b, 1, "USER", "bench", "ITEM:1001", day) - before; took < n-n/1000 || took > n {
						b.Fatalf("redis-benchmark's %d scripts took %d: they did not all run", n, took)
					}
					o := serviceRate(b, e, n)
					cpu2 := redisCPU(b, rdb)
					theirs, ours, ratios = append(theirs, t), append(ours, o), append(ratios, o/t)
					theirCPU, ourCPU = append(theirCPU, (cpu1-cpu0)*1e6/n), append(ourCPU, (cpu2-cpu1)*1e6/n)
				}
				b.ReportMetric(median(theirs), "redis-benchmark/s")
				b.ReportMetric(median(ours), "deducts/s")
				b.ReportMetric(median(ratios), "ratio")
				b.ReportMetric(median(theirCPU), "script-redis-µs/op")
				b.ReportMetric(median(ourCPU), "deduct-redis-µs/op")
			}
		})
	}
}

// redisCPU returns the CPU seconds so far of every master behind rdb (INFO cpu).
func redisCPU(b *testing.B, rdb redis.UniversalClient) float64 {
	var mu sync.Mutex
	var sum time.Duration
	add := func(ctx context.Context, c *redis.Client) error {
		used, err := testkit.RedisCPU(ctx, c)
		mu.Lock()
		sum += used
		mu.Unlock()
		return err
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(context.Background(), add)
	case *redis.Client:
		err = add(context.Background(), c)
	}
	if err != nil {
		b.Fatal(err)
	}
	return sum.Seconds()
}

// benchRounds is how many times a comparison alternates the two sides; it reports medians.
const benchRounds = 5

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// serviceRate runs n deducts on one identity through the service with benchClients callers.
func serviceRate(b *testing.B, e *env, n int64) float64 {
	run := runID.Add(1)
	var seq atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range benchClients {
		wg.Go(func() {
			for {
				i := seq.Add(1)
				if i > n {
					return
				}
				key := "s" + strconv.FormatInt(run, 10) + "-" + strconv.FormatInt(i, 10)
				if _, err := e.svc.Deduct(context.Background(), 1, key, deductItems(false, i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}
