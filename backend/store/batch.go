package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// lockVoucherSQL takes the voucher's row lock, first as every writer does. The write that
// follows it in the same round trip is a new statement, so its snapshot sees every redemption
// committed by the lock's earlier holders.
const lockVoucherSQL = `SELECT 1 FROM vouchers WHERE code = $1 FOR NO KEY UPDATE`

// writeBatchSQL writes, in arrival order, the holds Reserve would grant, and adds exactly as
// many to used_count, in one statement: a hold of a paused voucher, one reserved outside the
// voucher's period, or one whose customer holds per_user_limit active rows or has no free slot
// is left out, and no more holds are tried than uses are left. The database still guards every
// row: the unique order and active-slot indexes skip (ON CONFLICT DO NOTHING) an order already
// written or a slot another hold of this batch took; used_within_limit and slot_within_limit
// refuse the whole statement should anything pass a limit. It returns the voucher after the
// write and the rows it wrote as (order, customer) pairs, both arrays from one aggregation so
// they pair up.
const writeBatchSQL = `WITH v AS (
		SELECT code, per_user_limit, starts_at, ends_at, active, greatest(total_limit - used_count, 0) AS uses_left
		FROM vouchers WHERE code = $1),
	ins AS (
		INSERT INTO redemptions (voucher_code, per_user_limit, customer_id, order_id, slot, status,
			order_amount, discount_amount, reserved_at, hold_expires_at)
		SELECT v.code, v.per_user_limit, r.customer_id, r.order_id, free.n, 'RESERVED', r.order_amount,
			r.discount_amount, r.reserved_at, r.hold_expires_at
		FROM v CROSS JOIN unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::timestamptz[], $7::timestamptz[])
			WITH ORDINALITY AS r(customer_id, order_id, order_amount, discount_amount, reserved_at, hold_expires_at, i)
		CROSS JOIN LATERAL (SELECT coalesce(array_agg(taken.slot), '{}') AS slots FROM redemptions taken
			WHERE taken.voucher_code = v.code AND taken.customer_id = r.customer_id
				AND taken.status IN ('RESERVED', 'CONFIRMED')) AS held
		CROSS JOIN LATERAL (SELECT s.n FROM generate_series(1, v.per_user_limit) AS s(n)
			WHERE s.n <> ALL (held.slots) ORDER BY s.n LIMIT 1) AS free
		WHERE v.active AND v.starts_at <= r.reserved_at AND r.reserved_at < v.ends_at
			AND cardinality(held.slots) < v.per_user_limit
		ORDER BY r.i
		LIMIT (SELECT uses_left FROM v)
		ON CONFLICT DO NOTHING
		RETURNING order_id, customer_id),
	took AS (
		UPDATE vouchers SET used_count = used_count + (SELECT count(*) FROM ins) WHERE code = $1
		RETURNING used_count, total_limit),
	rows AS (SELECT coalesce(array_agg(order_id), '{}') AS orders, coalesce(array_agg(customer_id), '{}') AS customers FROM ins)
	SELECT took.used_count, took.total_limit, v.starts_at, v.ends_at, v.active, rows.orders, rows.customers
	FROM took CROSS JOIN v CROSS JOIN rows`

// ReserveMany writes the holds of one voucher in one transaction, sent in one round trip: lock
// the voucher row, then insert the holds Reserve would grant and add their count to used_count
// in one statement (writeBatchSQL), then COMMIT. Nothing is decided between the lock and the
// commit but by the server, so the row lock is held only while the server works.
//
// A hold is answered as written only when its own row is: the statement carries each orderId
// once (a later hold with an orderId already in the batch waits for the one-by-one pass below),
// and a written row is matched to its hold by order and customer. So two customers sending one
// orderId never share a row, nor one customer get two answers from one row.
//
// A hold the statement did not write (outside the period, no use or slot left, its order
// taken, its slot taken by a neighbour in the batch) gets the answer Reserve would give it
// next: ErrOutOfStock, or ErrNotEligible outside the period, when the batch took the last use;
// otherwise it is written or refused on its own through Reserve. In the flash path, where the
// gate already decided, that is rare.
//
// An error concerns the whole batch: ErrVoucherNotFound, or a failure that wraps ErrNotWritten
// when nothing can have been committed (nothing sent, or a statement before COMMIT the server
// refused); otherwise every hold's outcome is unknown, a repeated orderId's too: it was never
// sent, but the hold before it with its orderId may have been written, and the caller's read
// back tells whose row that is. Should the server refuse a batch of more than one hold with
// any error but its statement timeout (a guard caught what it did not foresee, or the
// connection was terminated before COMMIT), the holds are written one by one through Reserve;
// a lone hold is answered with the failure, as Reserve would answer it.
func (s *Store) ReserveMany(ctx context.Context, code string, holds []voucher.Hold) ([]voucher.Written, error) {
	out := make([]voucher.Written, len(holds))
	repeated := repeatedOrders(holds)
	send := make([]voucher.Hold, 0, len(holds))
	for i, h := range holds {
		if !repeated[i] {
			send = append(send, h)
		}
	}
	after, err := s.writeBatch(ctx, code, send)
	var pg *pgconn.PgError
	if len(holds) > 1 && errors.Is(err, voucher.ErrNotWritten) && errors.As(err, &pg) && pg.Code != queryCanceled {
		s.writeEach(ctx, out, holds, func(int) bool { return true }, err)
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for i, h := range holds {
		switch {
		case repeated[i]:
			out[i].Err = errNotInBatch // written alone after the batch, which had its orderId
		case after.written[rowKey{h.OrderID, h.CustomerID}]:
			out[i].Redemption = redemptionOf(code, h)
		case !after.active:
			out[i].Err = voucher.ErrPaused // paused under the lock: no hold of the batch is written
		case after.used >= after.total:
			// Reserve would now find no use to take, whatever else is wrong with the hold, and
			// tell why as whyNoUse does; the crowd that arrives with the last use is answered
			// without a transaction each.
			out[i].Err = voucher.ErrOutOfStock
			if why := closedAt(true, after.starts, after.ends, h.ReservedAt); why != nil {
				out[i].Err = why
			}
		default:
			out[i].Err = errNotInBatch
		}
	}
	s.writeEach(ctx, out, holds, func(i int) bool { return out[i].Err == errNotInBatch }, nil)
	return out, nil
}

// repeatedOrders tells, for each hold, whether an earlier hold of the batch has its orderId: the
// batch's statement carries each orderId once, so that a row it wrote is one hold's.
func repeatedOrders(holds []voucher.Hold) []bool {
	seen := make(map[string]bool, len(holds))
	repeated := make([]bool, len(holds))
	for i, h := range holds {
		repeated[i] = seen[h.OrderID]
		seen[h.OrderID] = true
	}
	return repeated
}

// errNotInBatch marks, for a moment, a hold the batch's statement did not write.
var errNotInBatch = errors.New("not written by the batch")

// queryCanceled is the server's statement_timeout: the batch took too long and was refused
// whole; writing it again one by one would only take longer.
const queryCanceled = "57014"

// rowKey names a redemption the batch wrote: its order and its customer.
type rowKey struct{ order, customer string }

// batchWritten is what writeBatchSQL returns: the voucher after the batch, and the rows it wrote.
type batchWritten struct {
	used, total  int
	starts, ends time.Time
	active       bool
	written      map[rowKey]bool
}

// writeBatch sends BEGIN, the statement limit, the lock, writeBatchSQL and COMMIT in one round
// trip, and sorts a failure by when it came. Before COMMIT is sent nothing is written; a
// statement before COMMIT that the server refused, even with a FATAL, leaves nothing written (the
// server runs the pipeline in order, so COMMIT never ran); any error in COMMIT's answer leaves
// the outcome unknown (the server may have committed and died before saying so); and once COMMIT
// is acknowledged the rows are written, whatever comes after (a connection terminated before
// its ReadyForQuery).
func (s *Store) writeBatch(ctx context.Context, code string, holds []voucher.Hold) (batchWritten, error) {
	var after batchWritten
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return after, notWritten(err, "reserve %d in %s: acquire a connection", len(holds), code)
	}
	defer conn.Release()
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < minWriteTime {
		return after, notWritten(context.DeadlineExceeded, "reserve %d in %s: %v left to write", len(holds), code, time.Until(deadline))
	}
	c := columnsOf(holds)
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(statementTimeoutSQL, statementTimeout(ctx))
	b.Queue(lockVoucherSQL, code)
	b.Queue(writeBatchSQL, code, c.customers, c.orders, c.amounts, c.discounts, c.reservedAts, c.expiresAts)
	b.Queue("commit")
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	for range 2 { // begin, the limit
		if _, err := br.Exec(); err != nil {
			return after, failed(err, "reserve %d in %s: begin", len(holds), code)
		}
	}
	tag, err := br.Exec()
	if err != nil {
		return after, failed(err, "reserve %d in %s: lock voucher", len(holds), code)
	}
	var orders, customers []string
	err = br.QueryRow().Scan(&after.used, &after.total, &after.starts, &after.ends, &after.active, &orders, &customers)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) { // no row: no voucher, told below
		return after, failed(err, "reserve %d in %s: write", len(holds), code)
	}
	commit, err := br.Exec()
	switch {
	case err != nil:
		return after, outcomeUnknown(err, "reserve %d in %s: commit", len(holds), code)
	case commit.String() != "COMMIT": // the server rolled the transaction back instead
		return after, notWritten(fmt.Errorf("commit answered %q", commit), "reserve %d in %s: commit", len(holds), code)
	}
	// COMMIT is acknowledged: the rows are durable. An error from here on (the server
	// terminating the connection before its ReadyForQuery) changes nothing, and pgx does not
	// reuse the connection.
	_ = br.Close()
	if tag.RowsAffected() == 0 {
		return after, voucher.ErrVoucherNotFound // nothing was written: the statement needs the voucher
	}
	after.written = make(map[rowKey]bool, len(orders))
	for i, o := range orders {
		after.written[rowKey{o, customers[i]}] = true
	}
	return after, nil
}

// batchColumns are the holds as the columns writeBatchSQL unnests.
type batchColumns struct {
	customers, orders       []string
	amounts, discounts      []int64
	reservedAts, expiresAts []time.Time
}

func columnsOf(holds []voucher.Hold) batchColumns {
	n := len(holds)
	c := batchColumns{make([]string, n), make([]string, n), make([]int64, n), make([]int64, n),
		make([]time.Time, n), make([]time.Time, n)}
	for i, h := range holds {
		c.customers[i], c.orders[i] = h.CustomerID, h.OrderID
		c.amounts[i], c.discounts[i] = h.OrderAmount, h.DiscountAmount
		c.reservedAts[i], c.expiresAts[i] = h.ReservedAt, h.ExpiresAt
	}
	return c
}

// redemptionOf is the row written for h, as the database holds it (times to the microsecond):
// built here rather than sent back, which costs the server and pgx a row of eight columns each.
func redemptionOf(code string, h voucher.Hold) voucher.Redemption {
	return voucher.Redemption{VoucherCode: code, CustomerID: h.CustomerID, OrderID: h.OrderID,
		Status: wire.StatusReserved, OrderAmount: h.OrderAmount, DiscountAmount: h.DiscountAmount,
		ReservedAt: h.ReservedAt.Truncate(time.Microsecond), HoldExpiresAt: h.ExpiresAt.Truncate(time.Microsecond)}
}

// writeEach writes through Reserve each hold of holds whose index is picked, so each gets the
// answer it would get alone; cause, when not nil, is why the batch's statement was refused.
func (s *Store) writeEach(ctx context.Context, out []voucher.Written, holds []voucher.Hold, picked func(int) bool, cause error) {
	for i, h := range holds {
		if !picked(i) {
			continue
		}
		out[i].Redemption, out[i].Err = s.Reserve(ctx, h, h.ReservedAt)
		if out[i].Err != nil && cause != nil && !isRefusal(out[i].Err) {
			out[i].Err = fmt.Errorf("%w (after the batch was refused: %v)", out[i].Err, cause)
		}
	}
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
