package store_test

import (
	"context"
	"testing"
	"time"

	"vouchergate/backend/store"
)

// Warm leaves n connections open, each with the hot statements prepared, and the pool's
// minimum keeps them: a sale's first writes find a connection with their statements planned.
func TestWarmPreparesTheHotStatementsOnEachConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, migrated := openStore(t) // a database with the schema the statements name
	url := migrated.Config().ConnString()
	const n = 3
	pool, err := store.OpenTraced(ctx, url, 8, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := store.Warm(ctx, pool, n); err != nil {
		t.Fatalf("warm: %v", err)
	}
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
