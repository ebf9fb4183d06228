package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"vouchergate/backend/store"
)

// Warm leaves n connections open, each with the hot statements prepared, and the pool's
// minimum keeps them: a sale's first writes find a connection with their statements planned.
func TestWarmPreparesTheHotStatementsOnEachConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 3
	pool := warmedPool(t, ctx, n)
	if got := pool.Stat().TotalConns(); got < n {
		t.Fatalf("%d connections open after warming; want %d", got, n)
	}
	// each of the n idle connections, held at once so they are n different ones
	var held []int64
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		count := func() int64 {
			var prepared int64
			if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements`).Scan(&prepared); err != nil {
				t.Fatal(err)
			}
			return prepared
		}
		prepared := count()
		held = append(held, prepared)
		// a hot statement sent now runs as the one prepared: nothing more is prepared
		hot := store.HotStatements()
		rows, err := c.Query(ctx, hot[len(hot)-1], "NOPE") // the voucher's read
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if after := count(); after != prepared {
			t.Errorf("the voucher's read prepared %d statements more; want it to use the warmed one", after-prepared)
		}
	}
	for i, p := range held {
		if p < int64(len(store.HotStatements())) {
			t.Errorf("connection %d has %d statements prepared; want the %d hot ones", i, p, len(store.HotStatements()))
		}
	}
}

// Warm runs each hot statement on each warmed connection as an opening would, often enough that
// PostgreSQL has planned it past its custom plans, and writes nothing: a sale's first batch on
// a connection costs what a later one does.
func TestWarmRehearsesTheHotStatementsAndWritesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := warmedPool(t, ctx, 2)
	for i := range 2 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		// readied once: as the pool opened it, not again by Warm
		runs := checkRehearsed(t, ctx, c, fmt.Sprintf("warmed connection %d", i))
		if got := runs[store.WriteBatchSQL]; got != store.PlannedRuns {
			t.Errorf("warmed connection %d ran the batch %d times; want %d (rehearsed once)", i, got, store.PlannedRuns)
		}
	}
	var vouchers, redemptions int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM vouchers), (SELECT count(*) FROM redemptions)`).Scan(&vouchers, &redemptions); err != nil {
		t.Fatal(err)
	}
	if vouchers != 0 || redemptions != 0 {
		t.Fatalf("warming left %d vouchers and %d redemptions; want none", vouchers, redemptions)
	}
}

// A connection the pool opens after Warm, as it grows in a sale, is rehearsed before its first
// use, not cold under the first batch it carries.
func TestConnectionsOpenedLaterAreRehearsed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := warmedPool(t, ctx, 1)
	for i := range 4 { // held at once: three of them opened now
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		checkRehearsed(t, ctx, c, fmt.Sprintf("connection %d", i))
	}
}

// warmedPool is a pool on a migrated database of the test's own, keeping n connections open, and
// warmed (Warm) with n.
func warmedPool(t *testing.T, ctx context.Context, n int) *pgxpool.Pool {
	t.Helper()
	_, migrated := openStore(t) // a database with the schema the statements name
	pool, err := store.OpenTraced(ctx, migrated.Config().ConnString(), 8, int32(n), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := store.Warm(ctx, pool, n); err != nil {
		t.Fatalf("warm: %v", err)
	}
	return pool
}

// checkRehearsed fails the test unless each hot statement has run on c as often as Warm runs it,
// and returns how often each statement c has prepared has run.
func checkRehearsed(t *testing.T, ctx context.Context, c *pgxpool.Conn, what string) map[string]int64 {
	t.Helper()
	runs := map[string]int64{}
	rows, err := c.Query(ctx, `SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var sql string
		var n int64
		if err := rows.Scan(&sql, &n); err != nil {
			t.Fatal(err)
		}
		runs[sql] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for j, sql := range store.HotStatements() {
		want := int64(store.PlannedRuns)
		if j == 0 { // the statement limit, set once per transaction
			want = 1
		}
		if runs[sql] < want {
			t.Errorf("%s ran hot statement %d %d times; want at least %d", what, j, runs[sql], want)
		}
	}
	return runs
}
