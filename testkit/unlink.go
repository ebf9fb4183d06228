package testkit

import (
	"context"
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
