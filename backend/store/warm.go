package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// hotStatements are what a sale's opening sends on each connection: a flash batch (the time
// limit, the voucher's lock, the guarded insert), a single write, a retry's lookup and the read
// of a voucher's definition.
var hotStatements = []string{statementTimeoutSQL, lockVoucherSQL, writeBatchSQL, reserveSQL, lookupSQL, voucherSQL}

// Warm readies n of pool's connections for a sale's opening before the backend serves: each is
// dialled (a PostgreSQL server process forked and authenticated), has the hot statements
// prepared and runs them as an opening would until they are planned (rehearseHot), so the
// opening's first writes neither wait for a dial nor parse, plan or load anything (pgx sends a
// statement whose text was prepared on the connection by its name).
// It holds the n connections at once, so that they are n different ones; then, once the pool
// dials no more (its own MinConns, the same n, may have dialled some meanwhile), it prepares the
// statements on every other idle connection too, so that none the pool keeps is cold. The pool's
// MinConns keeps them open. Connections the pool opens later are readied as they open
// (readyNewConn).
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
			errs[i] = prepareHot(ctx, c.Conn())
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for pool.Stat().ConstructingConns() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("warm the database pool: wait for its connections: %w", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	others := pool.AcquireAllIdle(ctx)
	defer func() {
		for _, c := range others {
			c.Release()
		}
	}()
	for _, c := range others {
		if err := prepareHot(ctx, c.Conn()); err != nil {
			return err
		}
	}
	return nil
}

// readied marks a connection whose hot statements are prepared and rehearsed, in its pgconn's
// CustomData: the pool readies a connection as it opens, and Warm then finds it done.
const readied = "vouchergate/backend/store: readied"

// prepareHot prepares the hot statements on c and rehearses them, once per connection.
func prepareHot(ctx context.Context, c *pgx.Conn) error {
	if c.PgConn().CustomData()[readied] == true {
		return nil
	}
	if err := prepareStatements(ctx, c); err != nil {
		return err
	}
	if err := rehearseHot(ctx, c); err != nil {
		return err
	}
	c.PgConn().CustomData()[readied] = true
	return nil
}

// prepareStatements prepares the hot statements on c, named by their text; one prepared
// already is not prepared again.
func prepareStatements(ctx context.Context, c *pgx.Conn) error {
	for _, sql := range hotStatements {
		if _, err := c.Prepare(ctx, sql, sql); err != nil {
			return fmt.Errorf("warm the database pool: prepare: %w", err)
		}
	}
	return nil
}

// readyNewConn is the pool's AfterConnect: a connection opened after Warm (the pool growing in
// a sale) gets its hot statements prepared and rehearsed before its first use, so that its
// first batch does not hold a voucher's row lock while PostgreSQL plans. It never refuses the
// connection: before the schema is migrated the statements cannot be prepared, and a
// connection that could not be readied still serves, preparing them on first use.
func readyNewConn(ctx context.Context, c *pgx.Conn) error {
	_ = prepareHot(ctx, c)
	return nil
}
