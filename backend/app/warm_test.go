package app_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest"
	"vouchergate/lua"
	"vouchergate/testkit"
)

// A backend is warm before it serves: its PostgreSQL connections are open (VG_DB_WARM_CONNS),
// its Redis pool holds its idle floor, and every gate and quota script is loaded in a Redis that
// had none, so a sale right after a start meets no dial and no NOSCRIPT.
func TestBackendIsWarmBeforeItServes(t *testing.T) {
	srv := testkit.StartRedis(t) // no script loaded by anyone else
	cfg := backendtest.Config(t)
	cfg.RedisURL, cfg.DBWarmConns = srv.URL(), 4
	b := backendtest.Start(t, cfg)

	if got := b.App.Pool.Stat().TotalConns(); got < int32(cfg.DBWarmConns) {
		t.Errorf("%d PostgreSQL connections open once started; want the %d warm ones", got, cfg.DBWarmConns)
	}
	if got := b.App.Redis.PoolStats().TotalConns; got < 16 {
		t.Errorf("%d Redis connections open once started; want the pool's idle floor, 16", got)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	scripts := append(append([]*redis.Script{}, lua.Gate...), lua.QuotaDeduct, lua.QuotaGiveBack, lua.QuotaCheck)
	hashes := make([]string, len(scripts))
	for i, s := range scripts {
		hashes[i] = s.Hash()
	}
	loaded, err := rdb.ScriptExists(context.Background(), hashes...).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range loaded {
		if !ok {
			t.Errorf("script %d of %d not loaded once the backend started", i+1, len(scripts))
		}
	}
}
