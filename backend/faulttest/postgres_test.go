package faulttest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"vouchergate/backend/backendtest"
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
			met := c.unavailable.Load()
			tc.down(pg)
			c.waitUnavailable(t, met, 20, "clients meet the missing database: 503, and retry")
			pg.Start()

			outcomes := settle(t, c, code, s.wait(t))
			t.Logf("%s", tally(outcomes))
			granted := checkAnswers(t, b.App.Pool, code, outcomes)
			checkNoOverAllocation(t, b.App.Pool, code)
			b.CheckRedis(t, code)
			held := hanging(backendtest.ReadGate(t, b.App.Redis, b.Config.RedisPrefix, code), rows(t, b.App.Pool, code))
			t.Logf("uses held in redis without a row before reconciliation: %d %v", len(held), held)

			rep := finish(t, b, clock, c, code, granted, customers(outcomes))
			if !sameSet(rep.Released, held) {
				t.Errorf("reconciliation released %s; redis held %s without a row", brief(rep.Released), brief(held))
			}
		})
	}
}

// PostgreSQL stalls mid-sale: a transaction holds the voucher's row lock while writes fail, so
// the gate's winners queue on the lock, and for the backend's four connections, until their
// write's deadline. None of those writes can commit: those that reached the server are
// refused by its time limit, those that never got a connection were never sent. So they give
// their use back at once, as the failure table says of a write that fails after the gate said
// yes. The clients try once and leave, so no retry cleans up after them. Only a write whose
// deadline passed before the server's refusal came back (a starved machine) has an unknown
// outcome and may leave its use held for the reconciler: at most a tenth of the failed writes
// may, where before the fix every write that timed out waiting for a connection did.
func TestPostgresStallsMidSale(t *testing.T) {
	b, clock, c := startBackend(t, func(cfg *config.Backend) {
		cfg.DBMaxConns, cfg.DBTimeout = 4, 500*time.Millisecond
	})
	const code, total = "PG-STALL", 150
	createFlash(t, b, code, total, 2)
	once := policy{tries: 1, timeout: func(int) time.Duration { return 30 * time.Second }}

	// The stalling transaction is open before the sale starts, so that the lock follows the
	// grants it waits for at once: on a quiet machine the rest of the uses sell in a moment, and
	// a lock taken after them stalls no write.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.Config.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := startSale(storm("", 600, 9), 48, func(a attempt) outcome { return c.reserveOrder(code, a, once) })
	s.waitGranted(t, total/5)
	met := c.unavailable.Load()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM vouchers WHERE code = $1 FOR NO KEY UPDATE`, code); err != nil {
		t.Fatal(err)
	}
	s.running(t, "stall postgres")
	// Held until writes have failed behind the lock (the clients try once: each 503 is one).
	c.waitUnavailable(t, met, 20, "writes failing behind the held row lock")
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	outcomes := s.wait(t)
	t.Logf("%s", tally(outcomes))
	failed := 0
	for _, o := range outcomes {
		if o.status == 503 {
			failed++
		}
	}
	if failed == 0 {
		t.Fatalf("no reservation failed: the stall did not stop the writes")
	}
	waitQuiet(t, b.App.Pool, b.App.Redis, b.Config.RedisPrefix, code)
	granted := checkAnswers(t, b.App.Pool, code, outcomes)
	held := hanging(backendtest.ReadGate(t, b.App.Redis, b.Config.RedisPrefix, code), rows(t, b.App.Pool, code))
	t.Logf("%d writes failed in the stall; %d uses hang in redis without a row", failed, len(held))
	if len(held)*10 > failed {
		t.Errorf("%d uses hang in redis without a row after %d writes failed in the stall: %s", len(held), failed, brief(held))
	}
	b.CheckRedis(t, code)
	finish(t, b, clock, c, code, granted, customers(outcomes))
}
