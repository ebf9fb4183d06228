package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// lockVoucherSQL takes the voucher's row lock, first as every writer does, and reads what a
// batch is decided on. Nothing of it changes while the lock is held.
const lockVoucherSQL = `SELECT used_count, total_limit, per_user_limit, starts_at, ends_at
	FROM vouchers WHERE code = $1 FOR NO KEY UPDATE`

// Read under the lock, each statement with a fresh snapshot (READ COMMITTED), so they see every
// redemption committed by the lock's earlier holders.
const (
	takenOrdersSQL = `SELECT r.order_id FROM unnest($1::text[]) AS o(id)
		CROSS JOIN LATERAL (SELECT order_id FROM redemptions WHERE order_id = o.id OFFSET 0) r`
	// One index probe per order and per customer. OFFSET 0 keeps the planner from flattening a
	// probe into a scan of a whole index, which it prefers while the table's statistics still
	// say it is small (9-15 ms per batch at 20,000 rows, under the row lock).
	takenSlotsSQL = `SELECT c.id, r.slot FROM unnest($2::text[]) AS c(id)
		CROSS JOIN LATERAL (SELECT slot FROM redemptions
			WHERE voucher_code = $1 AND customer_id = c.id AND status IN ('RESERVED', 'CONFIRMED') OFFSET 0) r`
)

// writeBatchSQL inserts the batch's rows and adds exactly as many to used_count in one
// statement. The database still guards every row: used_within_limit refuses a used_count past
// total_limit, the active-slot index a second use of a slot, slot_within_limit a slot past
// per_user_limit; any of them aborts the whole statement. An orderId another voucher's writer
// committed meanwhile is skipped (ON CONFLICT) and not counted.
const writeBatchSQL = `WITH ins AS (
		INSERT INTO redemptions (voucher_code, per_user_limit, customer_id, order_id, slot, status,
			order_amount, discount_amount, reserved_at, hold_expires_at)
		SELECT $1, $2, r.customer_id, r.order_id, r.slot, 'RESERVED', r.order_amount, r.discount_amount,
			r.reserved_at, r.hold_expires_at
		FROM unnest($3::text[], $4::text[], $5::int[], $6::bigint[], $7::bigint[], $8::timestamptz[], $9::timestamptz[])
			AS r(customer_id, order_id, slot, order_amount, discount_amount, reserved_at, hold_expires_at)
		ON CONFLICT (order_id) DO NOTHING
		RETURNING order_id),
	took AS (
		UPDATE vouchers SET used_count = used_count + (SELECT count(*) FROM ins) WHERE code = $1)
	SELECT order_id FROM ins`

// ReserveMany writes the holds of one voucher in one transaction: lock the voucher row, read
// which orders and customer slots are taken, decide every hold as Reserve would alone (see
// decideBatch), then insert the accepted rows and add their count to used_count in one
// statement. Holds the database refuses are answered on their own and never fail the others.
//
// An error concerns the whole batch: ErrVoucherNotFound, or a failure that wraps
// ErrNotWritten when nothing can have been committed (anything before COMMIT was sent, or a
// COMMIT the server refused); otherwise every hold's outcome is unknown. Should the server
// refuse a batch of several holds whole (a guard caught what the decision missed), the holds
// are written one by one through Reserve, whose answers they then get; a lone hold's refusal
// is its own, answered as Reserve would answer it.
func (s *Store) ReserveMany(ctx context.Context, code string, holds []voucher.Hold) ([]voucher.Written, error) {
	out, err := s.reserveBatch(ctx, code, holds)
	var pg *pgconn.PgError
	if len(holds) > 1 && errors.As(err, &pg) && pg.Code != queryCanceled {
		return s.reserveOneByOne(ctx, holds, err)
	}
	return out, err
}

// reserveBatch is one batch in two round trips: BEGIN and the reads under the row lock, then
// the write with COMMIT. A failure before the second is sent leaves the transaction open on
// the connection, which the pool then closes: nothing is written. In the second, the server
// skips COMMIT after a refused write, so only a failure to hear back is an unknown outcome.
func (s *Store) reserveBatch(ctx context.Context, code string, holds []voucher.Hold) ([]voucher.Written, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, notWritten(err, "reserve %d in %s: acquire a connection", len(holds), code)
	}
	defer conn.Release()
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < minWriteTime {
		return nil, notWritten(context.DeadlineExceeded, "reserve %d in %s: %v left to write", len(holds), code, time.Until(deadline))
	}
	v, taken, slots, err := readForBatch(ctx, conn, code, holds)
	if err != nil {
		return nil, err
	}
	out, rows := decideBatch(v, holds, taken, slots)
	if len(rows.orders) == 0 {
		_, _ = conn.Exec(ctx, "rollback") // nothing to write; on failure the pool drops the connection
		return out, nil
	}
	// Sent only while there is time for the answer: one sent too late would leave the outcome
	// unknown, one not sent leaves nothing written.
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < minWriteTime/2 {
		return nil, notWritten(context.DeadlineExceeded, "reserve %d in %s: %v left to commit", len(rows.orders), code, time.Until(deadline))
	}
	if err := writeRows(ctx, conn, code, v.perUser, rows, holds, out); err != nil {
		// a refusal stays a *PgError inside, for ReserveMany to write the holds one by one
		return nil, failed(err, "reserve %d in %s: write and commit", len(rows.orders), code)
	}
	return out, nil
}

// queryCanceled is the server's statement_timeout: the batch took too long and was refused
// whole; writing it again one by one would only take longer.
const queryCanceled = "57014"

// batchVoucher is what a batch is decided on, read under the voucher's row lock.
type batchVoucher struct {
	used, total, perUser int
	starts, ends         time.Time
}

func readForBatch(ctx context.Context, conn *pgxpool.Conn, code string, holds []voucher.Hold) (batchVoucher, map[string]bool, map[string][]int, error) {
	orders := make([]string, len(holds))
	customers := make([]string, 0, len(holds))
	seen := make(map[string]bool, len(holds))
	for i, h := range holds {
		orders[i] = h.OrderID
		if !seen[h.CustomerID] {
			seen[h.CustomerID] = true
			customers = append(customers, h.CustomerID)
		}
	}
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(`SELECT set_config('statement_timeout', $1, true)`, statementTimeout(ctx))
	// Plan the batch's statements for the table as it is now: a plan cached while a sale's
	// table was nearly empty scans it whole once it holds thousands of rows (50 ms per batch
	// at 50,000, under the row lock).
	b.Queue(`SELECT set_config('plan_cache_mode', 'force_custom_plan', true)`)
	b.Queue(lockVoucherSQL, code)
	b.Queue(takenOrdersSQL, orders)
	b.Queue(takenSlotsSQL, code, customers)
	br := conn.SendBatch(ctx, b)
	defer br.Close()

	var v batchVoucher
	var err error
	for range 3 { // begin and the two settings
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if err == nil {
		err = br.QueryRow().Scan(&v.used, &v.total, &v.perUser, &v.starts, &v.ends)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return v, nil, nil, voucher.ErrVoucherNotFound
	case err != nil:
		return v, nil, nil, notWritten(err, "reserve %d in %s: lock voucher", len(holds), code)
	}
	rows, _ := br.Query()
	takenOrders, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return v, nil, nil, notWritten(err, "reserve %d in %s: read taken orders", len(holds), code)
	}
	taken := make(map[string]bool, len(takenOrders))
	for _, o := range takenOrders {
		taken[o] = true
	}
	slots := map[string][]int{}
	rows, _ = br.Query()
	var customer string
	var slot int
	_, err = pgx.ForEachRow(rows, []any{&customer, &slot}, func() error {
		slots[customer] = append(slots[customer], slot)
		return nil
	})
	if err == nil {
		err = br.Close()
	}
	if err != nil {
		return v, nil, nil, notWritten(err, "reserve %d in %s: read taken slots", len(holds), code)
	}
	return v, taken, slots, nil
}

// batchRows are the accepted holds as the columns writeBatchSQL unnests.
type batchRows struct {
	index                   []int // into holds
	customers, orders       []string
	slots                   []int32
	amounts, discounts      []int64
	reservedAts, expiresAts []time.Time
}

// decideBatch decides each hold, in order, as Reserve would decide it alone after the holds
// before it: closed at its reservation time (ErrNotEligible), then no use left
// (ErrOutOfStock), then no free slot of its customer (ErrAlreadyUsed), then an orderId already
// written (ErrOrderExists). An accepted hold takes a use and its customer's lowest free slot.
func decideBatch(v batchVoucher, holds []voucher.Hold, taken map[string]bool, slots map[string][]int) ([]voucher.Written, batchRows) {
	out := make([]voucher.Written, len(holds))
	var rows batchRows
	used := v.used
	for i, h := range holds {
		slot := freeSlot(slots[h.CustomerID], v.perUser)
		switch {
		case h.ReservedAt.Before(v.starts) || !h.ReservedAt.Before(v.ends):
			out[i].Err = voucher.ErrNotEligible
		case used >= v.total:
			out[i].Err = voucher.ErrOutOfStock
		case slot == 0:
			out[i].Err = voucher.ErrAlreadyUsed
		case taken[h.OrderID]:
			out[i].Err = voucher.ErrOrderExists
		default:
			used++
			taken[h.OrderID] = true
			slots[h.CustomerID] = append(slots[h.CustomerID], slot)
			rows.add(i, h, slot)
		}
	}
	return out, rows
}

// freeSlot is the lowest of slots 1..limit not in taken, or 0 when all are.
func freeSlot(taken []int, limit int) int {
	for n := 1; n <= limit; n++ {
		free := true
		for _, t := range taken {
			if t == n {
				free = false
				break
			}
		}
		if free {
			return n
		}
	}
	return 0
}

func (r *batchRows) add(i int, h voucher.Hold, slot int) {
	r.index = append(r.index, i)
	r.customers = append(r.customers, h.CustomerID)
	r.orders = append(r.orders, h.OrderID)
	r.slots = append(r.slots, int32(slot))
	r.amounts = append(r.amounts, h.OrderAmount)
	r.discounts = append(r.discounts, h.DiscountAmount)
	r.reservedAts = append(r.reservedAts, h.ReservedAt)
	r.expiresAts = append(r.expiresAts, h.ExpiresAt)
}

// writeRows runs writeBatchSQL and COMMIT, and fills out with the written rows; an accepted
// hold the insert skipped had its orderId taken meanwhile by another voucher's writer.
func writeRows(ctx context.Context, conn *pgxpool.Conn, code string, perUser int, rows batchRows, holds []voucher.Hold, out []voucher.Written) error {
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('statement_timeout', $1, true)`, statementTimeout(ctx))
	b.Queue(writeBatchSQL, code, perUser, rows.customers, rows.orders, rows.slots, rows.amounts,
		rows.discounts, rows.reservedAts, rows.expiresAts)
	b.Queue("commit")
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return err
	}
	written := make(map[string]bool, len(rows.orders))
	res, _ := br.Query()
	var order string
	if _, err := pgx.ForEachRow(res, []any{&order}, func() error { written[order] = true; return nil }); err != nil {
		return err
	}
	if _, err := br.Exec(); err != nil { // COMMIT
		return err
	}
	if err := br.Close(); err != nil {
		return err
	}
	for _, i := range rows.index {
		if h := holds[i]; written[h.OrderID] {
			out[i].Redemption = redemptionOf(code, h)
		} else {
			out[i].Err = voucher.ErrOrderExists
		}
	}
	return nil
}

// redemptionOf is the row written for h, as the database holds it (times to the microsecond):
// built here rather than sent back, which costs the server and pgx a row of eight columns each.
func redemptionOf(code string, h voucher.Hold) voucher.Redemption {
	return voucher.Redemption{VoucherCode: code, CustomerID: h.CustomerID, OrderID: h.OrderID,
		Status: wire.StatusReserved, OrderAmount: h.OrderAmount, DiscountAmount: h.DiscountAmount,
		ReservedAt: h.ReservedAt.Truncate(time.Microsecond), HoldExpiresAt: h.ExpiresAt.Truncate(time.Microsecond)}
}

// reserveOneByOne writes each hold through Reserve after the batch's insert was refused whole,
// so each gets the answer it would get alone.
func (s *Store) reserveOneByOne(ctx context.Context, holds []voucher.Hold, cause error) ([]voucher.Written, error) {
	out := make([]voucher.Written, len(holds))
	for i, h := range holds {
		out[i].Redemption, out[i].Err = s.Reserve(ctx, h, h.ReservedAt)
		if out[i].Err != nil && !isRefusal(out[i].Err) {
			out[i].Err = fmt.Errorf("%w (after the batch was refused: %v)", out[i].Err, cause)
		}
	}
	return out, nil
}

// isRefusal reports whether err is the database refusing one hold, as Reserve returns it.
func isRefusal(err error) bool {
	for _, r := range []error{voucher.ErrNotEligible, voucher.ErrOutOfStock, voucher.ErrAlreadyUsed,
		voucher.ErrOrderExists, voucher.ErrVoucherNotFound} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}
