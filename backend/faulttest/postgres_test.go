package faulttest

import (
	"testing"
	"time"

	"vouchergate/shared/config"
	"vouchergate/testkit"
)

// PostgreSQL goes away for a few seconds mid-sale, stopped (fast shutdown: sessions ended
// with an error) or killed (SIGKILL: connections cut, crash recovery at start), and comes back.
// The gate's winners whose write certainly failed gave their use back, those whose outcome was
// unknown kept it, so Redis keeps every active row (R2 holds before any repair). Clients
// retrying their 503 converge, no 201 is lost and nothing is sold twice; reconciliation
// releases exactly the uses held without a row, after which Redis equals the database and the
// voucher sells exactly its remaining uses.
func TestPostgresDownMidSale(t *testing.T) {
	for _, tc := range []struct {
		name string
		down func(*testkit.PostgresServer)
	}{
		{"stopped", (*testkit.PostgresServer).Stop},
		{"killed", (*testkit.PostgresServer).Kill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := testkit.StartPostgres(t)
			b, clock, c := startBackend(t, func(cfg *config.Backend) { cfg.DatabaseURL = testkit.Database(t, pg.URL()) })
			const code, total = "PG-DOWN", 150
			createFlash(t, b, code, total, 2)

			s := startSale(storm("", 600, 3), 48, func(a attempt) outcome { return c.reserveOrder(code, a, patient) })
			s.waitGranted(t, total/3)
			s.running(t, "take postgres down")
			downAt := time.Now()
			tc.down(pg)
			t.Logf("postgres down in %s", time.Since(downAt).Round(time.Millisecond))
			time.Sleep(3 * time.Second)
			pg.Start()
			t.Logf("postgres up again %s after it went down", time.Since(downAt).Round(time.Millisecond))

			outcomes := settle(t, c, code, s.wait(t))
			t.Logf("sale over %s after postgres went down", time.Since(downAt).Round(time.Millisecond))
			t.Logf("%s", tally(outcomes))
			granted := checkAnswers(t, b.App.Pool, code, outcomes)
			checkNoOverAllocation(t, b.App.Pool, code)
			b.CheckRedis(t, code)
			held := hanging(readGate(t, b.App.Redis, b.Config.RedisPrefix, code), rows(t, b.App.Pool, code))
			t.Logf("uses held in redis without a row before reconciliation: %d %v", len(held), held)

			rep := finish(t, b, clock, c, code, granted, customers(outcomes))
			if !sameSet(rep.Released, held) {
				t.Errorf("reconciliation released %s; redis held %s without a row", brief(rep.Released), brief(held))
			}
		})
	}
}
