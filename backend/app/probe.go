package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisProbe is /readyz's and vouchergate_dependency_up's check of Redis: a PING, then a write.
// A full Redis (maxmemory reached under noeviction) answers PING and every read, yet refuses
// every write with OOM, and so every reservation and deduct; only a write shows it. The write
// is one SET of a key that expires by itself, and at most one is sent per probeWriteEvery
// whoever asks (a load balancer polling /readyz, Prometheus scraping): callers within that
// time share the last write's result. It is never on a request's path.
type redisProbe struct {
	rdb redis.UniversalClient
	key string // under VG_REDIS_PREFIX; on Redis Cluster it tests the one master of its slot

	mu      sync.Mutex // held while a write is in flight, so concurrent callers send none
	wroteAt time.Time
	err     error
}

// probeWriteEvery bounds the probe's writes; probeKeyTTL is how long its key stays.
const (
	probeWriteEvery = time.Second
	probeKeyTTL     = 10 * time.Second
)

func newRedisProbe(rdb redis.UniversalClient, prefix string) *redisProbe {
	return &redisProbe{rdb: rdb, key: prefix + "probe:writable"}
}

// check reports whether Redis answers and takes a write.
func (p *redisProbe) check(ctx context.Context) error {
	if err := p.rdb.Ping(ctx).Err(); err != nil {
		return err
	}
	return p.write(ctx)
}

func (p *redisProbe) write(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.wroteAt.IsZero() && time.Since(p.wroteAt) < probeWriteEvery {
		return p.err
	}
	err := p.rdb.Set(ctx, p.key, "1", probeKeyTTL).Err()
	if err != nil {
		err = fmt.Errorf("redis refuses writes: %w", err)
	}
	p.wroteAt, p.err = time.Now(), err
	return err
}
