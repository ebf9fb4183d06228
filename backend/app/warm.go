package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/store"
)

// warmBound bounds warming: a store that does not answer is /readyz's to report, and the
// backend starts anyway, warming on use as before.
const warmBound = 10 * time.Second

// warm readies the backend for a sale's opening before it serves: VG_DB_WARM_CONNS PostgreSQL
// connections dialled with the hot statements prepared and rehearsed (kept open by the pool's
// minimum), the Redis pool's idle floor dialled on every master, and the gate's scripts loaded
// (the quota service loads its own). A sale that opens right after a start (a deploy, a
// scale-up before a big sale) then meets no dial, no fork of a PostgreSQL server process, no
// statement loaded or planned on first use and no NOSCRIPT. A failure is logged, not fatal.
func (a *App) warm(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, warmBound)
	defer cancel()
	start := time.Now()
	err := errors.Join(
		store.Warm(ctx, a.Pool, a.Config.DBWarm()),
		warmRedis(ctx, a.Redis, redisIdle),
		a.Gate.LoadScripts(ctx),
	)
	if err != nil {
		a.log.Warn("not warmed for a sale's opening; it warms on use", "err", err, "took", time.Since(start).Round(time.Millisecond))
		return
	}
	a.log.Info("warmed for a sale's opening", "postgresConns", a.Config.DBWarm(), "redisConnsPerMaster", redisIdle,
		"took", time.Since(start).Round(time.Millisecond))
}

// warmRedis opens n connections to each master: n PINGs at once, so each needs one of its own,
// which the pool then keeps idle (its MinIdleConns is n).
func warmRedis(ctx context.Context, rdb redis.UniversalClient, n int) error {
	ping := func(ctx context.Context, c *redis.Client) error {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = c.Ping(ctx).Err() }()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("warm the redis pool: %w", err)
		}
		return nil
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, ping)
	case *redis.Client:
		return ping(ctx, c)
	}
	return nil
}
