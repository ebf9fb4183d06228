package quota_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/quota"
	"vouchergate/testkit"
)

// BenchmarkDurability measures what each way of keeping quota writes costs, side by side in
// rounds that alternate: on one replicated Redis Cluster (three masters, a replica each), a
// service answering at once (async) against one waiting for a replica's acknowledgement
// (replicated); and on a single Redis, without persistence against appendonly with appendfsync
// always (what to run instead of replicated on one server). Deducts on many identities from
// benchClients callers; it reports each setup's median deducts/s and p99 over the rounds, and
// the ratios to its baseline. Run it with -benchtime 1x.
func BenchmarkDurability(b *testing.B) {
	const rounds, perRound = 3, 3000
	cluster := testkit.StartReplicatedRedisCluster(b)
	crdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), PoolSize: 2 * benchClients, ReadTimeout: 2 * time.Second})
	b.Cleanup(func() { crdb.Close() })
	single := func(opts ...testkit.RedisOption) redis.UniversalClient {
		srv := testkit.StartRedis(b, opts...)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 2 * benchClients})
		b.Cleanup(func() { rdb.Close() })
		return rdb
	}
	asyncEnv := benchEnv(b, crdb)
	cfg := asyncEnv.cfg
	// a generous wait: it only bounds a failure, and on a busy machine a replica's
	// acknowledgement can take longer than the default; the cost measured is the wait itself
	cfg.Durability = quota.Durability{MinReplicas: 1, Wait: time.Second}
	replicated := &env{svc: asyncEnv.start(b, cfg), rdb: crdb, db: asyncEnv.db, clock: asyncEnv.clock, cfg: cfg}
	setups := []struct {
		name string
		e    *env
	}{
		{"cluster-async", asyncEnv},
		{"cluster-replicated", replicated},
		{"single", benchEnv(b, single())},
		{"single-aof-always", benchEnv(b, single(testkit.RedisPersistent()))},
	}
	rates := map[string][]float64{}
	p99s := map[string][]float64{}
	for range b.N {
		for range rounds {
			for _, s := range setups {
				rate, p99 := durableRate(b, s.e, perRound)
				rates[s.name] = append(rates[s.name], rate)
				p99s[s.name] = append(p99s[s.name], float64(p99.Microseconds())/1000)
			}
		}
	}
	for _, s := range setups {
		b.ReportMetric(median(rates[s.name]), s.name+"-deducts/s")
		b.ReportMetric(median(p99s[s.name]), s.name+"-p99-ms")
	}
	b.ReportMetric(median(rates["cluster-replicated"])/median(rates["cluster-async"]), "replicated/async")
	b.ReportMetric(median(rates["single-aof-always"])/median(rates["single"]), "aof-always/none")
}

// durableRate runs n deducts on many identities through e's service with benchClients callers
// and returns their rate and p99 latency.
func durableRate(b *testing.B, e *env, n int64) (float64, time.Duration) {
	run := runID.Add(1)
	var mu sync.Mutex
	took := make([]time.Duration, 0, n)
	var seq sync.Mutex
	next := int64(0)
	var wg sync.WaitGroup
	start := time.Now()
	for range benchClients {
		wg.Go(func() {
			for {
				seq.Lock()
				next++
				i := next
				seq.Unlock()
				if i > n {
					return
				}
				key := "d" + strconv.FormatInt(run, 10) + "-" + strconv.FormatInt(i, 10)
				began := time.Now()
				if _, err := e.svc.Deduct(context.Background(), 1, key, deductItems(true, i)); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(began)
				mu.Lock()
				took = append(took, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	rate := float64(n) / time.Since(start).Seconds()
	slices.Sort(took)
	if len(took) == 0 {
		return rate, 0
	}
	return rate, took[len(took)*99/100]
}
