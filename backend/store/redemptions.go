package store

import (
	"context"
	"errors"
	"fmt"
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

// Reserve takes one use in one transaction: the guarded UPDATE of the voucher (which also
// serialises the voucher's reservations, so the slot choice below cannot race), then the
// redemption in the customer's lowest free slot.
func (s *Store) Reserve(ctx context.Context, h voucher.Hold, now time.Time) (voucher.Redemption, error) {
	var r voucher.Redemption
	var inner error // what the transaction's body returned; anything else failed at BEGIN or COMMIT
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		r, inner = s.reserveIn(ctx, tx, h, now)
		return inner
	})
	if err != nil && err != inner {
		err = failed(err, "reserve %s: begin or commit", h.VoucherCode)
	}
	return r, err
}

func (s *Store) reserveIn(ctx context.Context, tx pgx.Tx, h voucher.Hold, now time.Time) (voucher.Redemption, error) {
	tag, err := tx.Exec(ctx, `UPDATE vouchers SET used_count = used_count + 1
		WHERE code = $1 AND used_count < total_limit AND starts_at <= $2 AND $2 < ends_at`, h.VoucherCode, now)
	if err != nil {
		return voucher.Redemption{}, failed(err, "reserve %s: take use", h.VoucherCode)
	}
	if tag.RowsAffected() == 0 {
		return voucher.Redemption{}, s.whyNoUse(ctx, tx, h, now)
	}
	r, err := scanRedemption(tx.QueryRow(ctx, `INSERT INTO redemptions (voucher_code, per_user_limit, customer_id,
			order_id, slot, status, order_amount, discount_amount, reserved_at, hold_expires_at)
		SELECT v.code, v.per_user_limit, $2, $3, free.n, 'RESERVED', $4, $5, $6, $7
		FROM vouchers v, generate_series(1, v.per_user_limit) AS free(n)
		WHERE v.code = $1 AND NOT EXISTS (
			SELECT 1 FROM redemptions r WHERE r.voucher_code = $1 AND r.customer_id = $2
			AND r.slot = free.n AND r.status IN ('RESERVED', 'CONFIRMED'))
		ORDER BY free.n LIMIT 1
		RETURNING `+redemptionColumns,
		h.VoucherCode, h.CustomerID, h.OrderID, h.OrderAmount, h.DiscountAmount, h.ReservedAt, h.ExpiresAt))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return r, voucher.ErrAlreadyUsed
	case isUnique(err, "redemptions_order_id_key"):
		return r, voucher.ErrOrderExists
	case isUnique(err, "redemptions_active_customer_slot"):
		return r, voucher.ErrAlreadyUsed
	case err != nil:
		return r, failed(err, "reserve %s: insert redemption", h.VoucherCode)
	}
	return r, nil
}

// whyNoUse tells why the guarded UPDATE matched no row.
func (s *Store) whyNoUse(ctx context.Context, tx pgx.Tx, h voucher.Hold, now time.Time) error {
	var used, total int
	var starts, ends time.Time
	err := tx.QueryRow(ctx, `SELECT used_count, total_limit, starts_at, ends_at FROM vouchers WHERE code = $1`,
		h.VoucherCode).Scan(&used, &total, &starts, &ends)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return voucher.ErrVoucherNotFound
	case err != nil:
		return failed(err, "reserve %s: read voucher", h.VoucherCode)
	case now.Before(starts) || !now.Before(ends):
		return voucher.ErrNotEligible
	}
	return voucher.ErrOutOfStock
}
