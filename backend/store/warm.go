package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// hotStatements are what a sale's opening sends on each connection: a flash batch (the time
// limit, the voucher's lock, the guarded insert), a single write, a retry's lookup and the read
// of a voucher's definition.
var hotStatements = []string{statementTimeoutSQL, lockVoucherSQL, writeBatchSQL, reserveSQL, lookupSQL, voucherSQL}

// Warm readies n of pool's connections for a sale's opening before the backend serves: each is
// dialled (a PostgreSQL server process forked and authenticated) and has the hot statements
// prepared, so the opening's first writes neither wait for a dial nor parse and plan their
// statements (pgx sends a statement whose text was prepared on the connection by its name).
// Connections the pool opens later prepare them on first use, as before. It holds the n
// connections at once, so that they are n different ones, then gives them back to the pool,
// whose MinConns (the same n) keeps them open.
func Warm(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Release()
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pool.Acquire(ctx)
			if err != nil {
				errs[i] = fmt.Errorf("warm the database pool: connect: %w", err)
				return
			}
			conns[i] = c
			for _, sql := range hotStatements {
				if _, err := c.Conn().Prepare(ctx, sql, sql); err != nil {
					errs[i] = fmt.Errorf("warm the database pool: prepare: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
