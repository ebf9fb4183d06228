package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// rehearseVoucherSQL creates the rehearsal's voucher: a flash voucher open now, one use per
// customer.
const rehearseVoucherSQL = `INSERT INTO vouchers (code, flash_sale, discount_amount, total_limit, per_user_limit, starts_at, ends_at)
	VALUES ($1, true, 1, 1000, 1, now() - interval '1 minute', now() + interval '1 hour')`

// plannedRuns is how often PostgreSQL plans a prepared statement anew (a custom plan for each
// run's values) before it may settle on a generic plan: its plan cache compares them after five.
const plannedRuns = 6

// rehearseHot runs the hot statements on c as a sale's opening runs them, plannedRuns times, in
// a transaction it rolls back, so that nothing is written. A prepared statement is not yet
// ready to run: the PostgreSQL server process loads the descriptions of the tables, indexes and
// constraints it touches, prepares the foreign key's check and plans the statement when it
// first runs it, and plans it again on each of its first runs. A connection's first batch of 32
// holds took ~15 ms where its later ones took 2–3 ms; rehearsed, the first takes ~3 ms and the
// cost is paid before the backend serves, not under a voucher's row lock in a sale's opening.
func rehearseHot(ctx context.Context, c *pgx.Conn) (err error) {
	tx, err := c.Begin(ctx)
	if err != nil {
		return fmt.Errorf("warm the database pool: rehearse: begin: %w", err)
	}
	defer func() {
		if rerr := tx.Rollback(ctx); err == nil && rerr != nil {
			err = fmt.Errorf("warm the database pool: rehearse: roll back: %w", rerr)
		}
	}()
	code, err := rehearsalCode()
	if err != nil {
		return err
	}
	now := time.Now()
	later := now.Add(time.Minute)
	batch := &pgx.Batch{}
	batch.Queue(rehearseVoucherSQL, code)
	batch.Queue(statementTimeoutSQL, "0")
	for i := range plannedRuns {
		first, second := fmt.Sprint(2*i), fmt.Sprint(2*i+1)
		batch.Queue(lockVoucherSQL, code)
		batch.Queue(writeBatchSQL, code, []string{first, second}, []string{code + "-" + first, code + "-" + second},
			[]int64{100, 100}, []int64{1, 1}, []time.Time{now, now}, []time.Time{later, later})
		batch.Queue(reserveSQL, code, now, "r"+first, code+"-r"+first, int64(100), int64(1), now, later)
		batch.Queue(lookupSQL, code, code+"-"+first)
		batch.Queue(voucherSQL, code)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("warm the database pool: rehearse the hot statements: %w", err)
	}
	return nil
}

// rehearsalCode is a voucher code no shop uses and no other rehearsal takes at the same time
// (the rows are never committed, but a second insert of one code would wait for the first).
func rehearsalCode() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("warm the database pool: rehearse: %w", err)
	}
	return "WARM-" + strings.ToUpper(hex.EncodeToString(b[:])), nil
}
