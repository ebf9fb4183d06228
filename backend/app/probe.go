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
// is one SET of a key that expires by itself (on Redis Cluster one on each master: probe_cluster.go),
// and at most one round of them is sent per probeWriteEvery whoever asks (a load balancer
// polling /readyz, Prometheus scraping): callers within that time share the last round's
// result. It is never on a request's path.
type redisProbe struct {
	rdb    redis.UniversalClient
	prefix string // VG_REDIS_PREFIX: the probe's keys are under it

	mu      sync.Mutex // held while a write is in flight, so concurrent callers send none
	wroteAt time.Time
	err     error
}

// probeWriteEvery bounds the probe's writes; probeKeyTTL is how long its keys stay.
const (
	probeWriteEvery = time.Second
	probeKeyTTL     = 10 * time.Second
)

func newRedisProbe(rdb redis.UniversalClient, prefix string) *redisProbe {
	return &redisProbe{rdb: rdb, prefix: prefix}
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
	var err error
	if c, ok := p.rdb.(*redis.ClusterClient); ok {
		err = p.writeEveryMaster(ctx, c)
	} else if err = p.rdb.Set(ctx, p.prefix+"probe:writable", "1", probeKeyTTL).Err(); err != nil {
		err = fmt.Errorf("redis refuses writes: %w", err)
	}
	p.wroteAt, p.err = time.Now(), err
	return err
}
