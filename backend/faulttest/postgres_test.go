package faulttest

import (
	"testing"
	"time"

	"vouchergate/shared/config"
	"vouchergate/testkit"
)

// PostgreSQL is stopped for a few seconds mid-sale and started again. The gate's winners whose
// write failed gave their use back (Redis keeps every active row: R2 holds before any repair),
// clients retrying their 503 converge, no 201 is lost and nothing is sold twice; uses left held
// by writes whose outcome was unknown are released by reconciliation, after which Redis equals
// the database and the voucher sells exactly its remaining uses.
func TestPostgresStoppedMidSale(t *testing.T) {
	pg := testkit.StartPostgres(t)
	b, clock, c := startBackend(t, func(cfg *config.Backend) { cfg.DatabaseURL = testkit.Database(t, pg.URL()) })
	const code, total = "PG-DOWN", 150
	createFlash(t, b, code, total, 2)

	attempts := storm("", 600, 3)
	s := startSale(attempts, 48, func(a attempt) outcome { return c.reserveOrder(code, a, patient) })
	s.waitGranted(t, total/3)
	s.running(t, "stop postgres")
	pg.Stop()
	time.Sleep(3 * time.Second)
	pg.Start()

	outcomes := settle(t, c, code, s.wait(t))
	t.Logf("%s", tally(outcomes))
	granted := checkAnswers(t, b.App.Pool, code, outcomes)
	checkNoOverAllocation(t, b.App.Pool, code)
	b.CheckRedis(t, code)
	g := readGate(t, b.App.Redis, b.Config.RedisPrefix, code)
	held := hanging(g, rows(t, b.App.Pool, code))
	t.Logf("uses held in redis without a row before reconciliation: %d %v", len(held), held)

	rep := finish(t, b, clock, c, code, granted, customers(outcomes))
	if !sameSet(rep.Released, held) {
		t.Errorf("reconciliation released %v; redis held %v without a row", rep.Released, held)
	}
}
