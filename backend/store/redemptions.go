package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"vouchergate/backend/voucher"
)

const redemptionColumns = `voucher_code, customer_id, order_id, status, order_amount, discount_amount, reserved_at, hold_expires_at`

func scanRedemption(row pgx.Row) (voucher.Redemption, error) {
	var r voucher.Redemption
	err := row.Scan(&r.VoucherCode, &r.CustomerID, &r.OrderID, &r.Status, &r.OrderAmount, &r.DiscountAmount,
		&r.ReservedAt, &r.HoldExpiresAt)
	return r, err
}

// Redemption reads an order's redemption.
func (s *Store) Redemption(ctx context.Context, orderID string) (voucher.Redemption, error) {
	r, err := scanRedemption(s.pool.QueryRow(ctx, `SELECT `+redemptionColumns+` FROM redemptions WHERE order_id = $1`, orderID))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, voucher.ErrReservationNotFound
	}
	if err != nil {
		return r, fmt.Errorf("read redemption %s: %w", orderID, err)
	}
	return r, nil
}

// ShopperOrders returns up to limit of the voucher's redemptions made by shoppers
// (wire.ShopperOrderID: "<customer>/<orderId>") whose client orderId is orderID, active ones
// first. It reads the voucher's redemptions through redemptions_voucher_status, so it is for a
// service that confirms or releases a shopper's order without naming the shopper, not for a hot
// path.
func (s *Store) ShopperOrders(ctx context.Context, code, orderID string, limit int) ([]voucher.Redemption, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+redemptionColumns+` FROM redemptions
		WHERE voucher_code = $1 AND strpos(order_id, '/') > 0 AND substring(order_id from '[^/]*$') = $2
		ORDER BY status NOT IN ('RESERVED', 'CONFIRMED'), id LIMIT $3`, code, orderID, limit)
	if err != nil {
		return nil, fmt.Errorf("find shoppers' orders %s of %s: %w", orderID, code, err)
	}
	defer rows.Close()
	var out []voucher.Redemption
	for rows.Next() {
		r, err := scanRedemption(rows)
		if err != nil {
			return nil, fmt.Errorf("find shoppers' orders %s of %s: %w", orderID, code, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find shoppers' orders %s of %s: %w", orderID, code, err)
	}
	return out, nil
}

// Lookup reads, in one query without locks, the order's redemption (if any) and whether the
// voucher has no use left. A snapshot may be a moment old: it can refuse a use that a release
// just gave back (under-allocation), never grant one.
func (s *Store) Lookup(ctx context.Context, code, orderID string) (voucher.Lookup, error) {
	return s.lookup(ctx, lookupSQL, code, orderID)
}

const lookupSQL = `SELECT v.used_count >= v.total_limit, v.revision, 0, ` + lookupOrderColumns + `
		FROM vouchers v LEFT JOIN redemptions r ON r.order_id = $2
		WHERE v.code = $1`

// LookupCustomer is Lookup with the customer's active redemptions of the voucher counted in
// the same statement, so in the same snapshot (a dry run's read of what the guarded write
// compares with per_user_limit). The hot path's Lookup stays without the count.
func (s *Store) LookupCustomer(ctx context.Context, code, orderID, customerID string) (voucher.Lookup, error) {
	return s.lookup(ctx, `SELECT v.used_count >= v.total_limit, v.revision,
			(SELECT count(*) FROM redemptions c WHERE c.voucher_code = v.code AND c.customer_id = $3
				AND c.status IN ('RESERVED', 'CONFIRMED')), `+lookupOrderColumns+`
		FROM vouchers v LEFT JOIN redemptions r ON r.order_id = $2
		WHERE v.code = $1`, code, orderID, customerID)
}

// lookupOrderColumns are the order's redemption, if any, in a lookup (r LEFT JOINed).
const lookupOrderColumns = `r.order_id IS NOT NULL,
		coalesce(r.voucher_code, ''), coalesce(r.customer_id, ''), coalesce(r.order_id, ''),
		coalesce(r.status, ''), coalesce(r.order_amount, 0), coalesce(r.discount_amount, 0),
		coalesce(r.reserved_at, 'epoch'), coalesce(r.hold_expires_at, 'epoch')`

// lookup runs a lookup query (args: code, orderID, ...) and reads its row.
func (s *Store) lookup(ctx context.Context, query, code, orderID string, more ...any) (voucher.Lookup, error) {
	var l voucher.Lookup
	var r voucher.Redemption
	var found bool
	err := s.pool.QueryRow(ctx, query, append([]any{code, orderID}, more...)...).Scan(&l.SoldOut, &l.Revision, &l.CustomerUses, &found,
		&r.VoucherCode, &r.CustomerID, &r.OrderID, &r.Status, &r.OrderAmount, &r.DiscountAmount, &r.ReservedAt, &r.HoldExpiresAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return l, voucher.ErrVoucherNotFound
	case err != nil:
		return l, fmt.Errorf("look up %s/%s: %w", code, orderID, err)
	}
	if found {
		l.Existing = &r
	}
	return l, nil
}

// ActiveRedemptions lists the voucher's RESERVED and CONFIRMED redemptions.
func (s *Store) ActiveRedemptions(ctx context.Context, code string) ([]voucher.Redemption, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+redemptionColumns+` FROM redemptions
		WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED')`, code)
	if err != nil {
		return nil, fmt.Errorf("list active redemptions of %s: %w", code, err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.Redemption, error) { return scanRedemption(row) })
	if err != nil {
		return nil, fmt.Errorf("list active redemptions of %s: %w", code, err)
	}
	return list, nil
}

// reserveSQL takes a use and writes the redemption in one statement: the guarded UPDATE of the
// voucher (active, in its period, a use left), then the redemption in the customer's lowest
// free slot. One statement, sent with its time limit in one round trip, holds the voucher's row
// lock only while the server runs it. No free slot, or as many active rows as per_user_limit
// (a limit lowered below what the customer holds keeps those, and refuses more), leaves slot
// NULL, which aborts the whole statement (nothing is taken).
const reserveSQL = `WITH take AS (
		UPDATE vouchers SET used_count = used_count + 1
		WHERE code = $1 AND used_count < total_limit AND starts_at <= $2 AND $2 < ends_at AND active
		RETURNING code, per_user_limit),
	held AS (
		SELECT coalesce(array_agg(r.slot), '{}') AS slots FROM redemptions r
		WHERE r.voucher_code = $1 AND r.customer_id = $3 AND r.status IN ('RESERVED', 'CONFIRMED'))
	INSERT INTO redemptions (voucher_code, per_user_limit, customer_id, order_id, slot, status,
		order_amount, discount_amount, reserved_at, hold_expires_at)
	SELECT take.code, take.per_user_limit, $3, $4,
		(SELECT free.n FROM generate_series(1, take.per_user_limit) AS free(n)
		 WHERE cardinality(held.slots) < take.per_user_limit AND free.n <> ALL (held.slots)
		 ORDER BY free.n LIMIT 1),
		'RESERVED', $5, $6, $7, $8
	FROM take CROSS JOIN held
	RETURNING ` + redemptionColumns

// slotTries bounds how often Reserve retries a statement that lost a slot to a concurrent
// reservation of the same customer (its snapshot predates the row lock it waited for).
const slotTries = 3

// Reserve takes one use, or returns ErrOutOfStock, ErrNotEligible, ErrAlreadyUsed,
// ErrOrderExists or a failure. A failure is ErrNotWritten when the server refused the
// statement (its time limit, a constraint) or it was never sent; otherwise its outcome is
// unknown. The server-side time limit ends before ctx's deadline, so a slow statement is
// refused rather than left unknown.
func (s *Store) Reserve(ctx context.Context, h voucher.Hold, now time.Time) (voucher.Redemption, error) {
	for try := 1; ; try++ {
		r, err := s.reserveOnce(ctx, h, now)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return r, s.whyNoUse(ctx, h, now)
		case isNotNull(err, "slot"):
			return r, voucher.ErrAlreadyUsed
		case isUnique(err, "redemptions_order_id_key"):
			return r, voucher.ErrOrderExists
		case isUnique(err, "redemptions_active_customer_slot") && try < slotTries:
			continue
		case isUnique(err, "redemptions_active_customer_slot"):
			return r, voucher.ErrAlreadyUsed
		case err != nil:
			return r, failed(err, "reserve %s", h.VoucherCode)
		}
		return r, nil
	}
}

func (s *Store) reserveOnce(ctx context.Context, h voucher.Hold, now time.Time) (voucher.Redemption, error) {
	// The connection first: a wait for one that runs out of time has sent nothing, and the
	// server's limit is what is left once the statement can go. With too little left for
	// the server's limit to end the statement before ours, it is not sent at all.
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return voucher.Redemption{}, notWritten(err, "reserve %s: acquire a connection", h.VoucherCode)
	}
	defer conn.Release()
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < minWriteTime {
		return voucher.Redemption{}, notWritten(context.DeadlineExceeded, "reserve %s: %v left to write", h.VoucherCode, time.Until(deadline))
	}
	b := &pgx.Batch{}
	b.Queue(statementTimeoutSQL, statementTimeout(ctx))
	b.Queue(reserveSQL, h.VoucherCode, now, h.CustomerID, h.OrderID, h.OrderAmount, h.DiscountAmount,
		h.ReservedAt, h.ExpiresAt)
	br := conn.SendBatch(ctx, b) // one implicit transaction, committed at the batch's Sync
	_, err = br.Exec()
	var r voucher.Redemption
	if err == nil {
		r, err = scanRedemption(br.QueryRow())
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		// the statement's answer came; the server commits at the Sync whose answer failed
		err = outcomeUnknown(cerr, "commit")
	}
	return r, err
}

// minWriteTime is the least time a reservation must have left to be sent: enough for its
// server-side limit (statementTimeout) to end it and the refusal to come back in time.
const minWriteTime = 50 * time.Millisecond

// statementTimeoutSQL sets the server-side limit of the statements after it in the transaction.
const statementTimeoutSQL = `SELECT set_config('statement_timeout', $1, true)`

// statementTimeout is the server-side limit for a statement under ctx: what is left of ctx's
// time less a margin for the answer to travel, or none without a deadline.
func statementTimeout(ctx context.Context) string {
	deadline, ok := ctx.Deadline()
	if !ok {
		return "0"
	}
	left := time.Until(deadline) - time.Until(deadline)/10 - 20*time.Millisecond
	return strconv.FormatInt(max(left.Milliseconds(), 10), 10)
}

// whyNoUse tells why the guarded UPDATE matched no row.
func (s *Store) whyNoUse(ctx context.Context, h voucher.Hold, now time.Time) error {
	var used, total int
	var starts, ends time.Time
	var active bool
	err := s.pool.QueryRow(ctx, `SELECT used_count, total_limit, starts_at, ends_at, active FROM vouchers WHERE code = $1`,
		h.VoucherCode).Scan(&used, &total, &starts, &ends, &active)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return voucher.ErrVoucherNotFound
	case err != nil:
		return notWritten(err, "reserve %s: read voucher after no use was taken", h.VoucherCode)
	}
	if why := closedAt(active, starts, ends, now); why != nil {
		return why
	}
	return voucher.ErrOutOfStock
}

// closedAt is why a voucher active or not, open from starts until ends, takes no reservation
// at now (the order of voucher.Voucher.Refusal), nil if it takes one.
func closedAt(active bool, starts, ends, now time.Time) error {
	switch {
	case !active:
		return voucher.ErrPaused
	case now.Before(starts):
		return voucher.ErrNotStarted
	case !now.Before(ends):
		return voucher.ErrEnded
	}
	return nil
}
