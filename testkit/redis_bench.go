package testkit

import (
	"context"
	"encoding/csv"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// UnlinkPrefix removes every key under prefix on a single Redis, in batches: benchmarks leave
// hundreds of thousands of keys, more than RedisPrefix's key-by-key cleanup removes in its
// time. On a cluster client it does nothing (a test cluster goes away whole).
func UnlinkPrefix(rdb redis.UniversalClient, prefix string) {
	c, ok := rdb.(*redis.Client)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", 5000).Iterator()
	batch := make([]string, 0, 1000)
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == cap(batch) {
			c.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		c.Unlink(ctx, batch...)
	}
}

// RedisBenchmark runs redis-benchmark with clients connections and n requests of cmd against
// the Redis at addr and returns its requests per second: the baseline a benchmark of a Redis
// path compares with. It fails the benchmark if redis-benchmark fails or met an error reply.
func RedisBenchmark(b *testing.B, addr string, clients, n int, cmd ...string) float64 {
	b.Helper()
	host, port, _ := strings.Cut(addr, ":")
	args := append([]string{"-h", host, "-p", port, "-c", strconv.Itoa(clients), "-n", strconv.Itoa(n),
		"-r", "2000000000", "--csv"}, cmd...)
	out, err := exec.Command("redis-benchmark", args...).CombinedOutput()
	if err != nil {
		b.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	rows, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(rows) < 2 || len(rows[1]) < 2 {
		b.Fatalf("redis-benchmark said %q", out)
	}
	rps, err := strconv.ParseFloat(rows[1][1], 64)
	if err != nil {
		b.Fatalf("redis-benchmark said %q", out)
	}
	if strings.Contains(string(out), "ERR") {
		b.Fatalf("redis-benchmark met errors: %s", out)
	}
	return rps
}
