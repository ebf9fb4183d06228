package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

const voucherColumns = `code, discount_amount, discount_percent, max_discount_amount, min_order_amount, total_limit,
	per_user_limit, starts_at, ends_at, flash_sale, active, hold_ttl_ms, revision, opened`

func scanVoucher(row pgx.Row, extra ...any) (voucher.Voucher, error) {
	var v voucher.Voucher
	var percent *int
	var holdMS *int64
	var active bool
	dst := append([]any{&v.Code, &v.DiscountAmount, &percent, &v.MaxDiscountAmount, &v.MinOrderAmount, &v.TotalLimit,
		&v.PerUserLimit, &v.StartsAt, &v.EndsAt, &v.FlashSale, &active, &holdMS, &v.Revision, &v.Opened}, extra...)
	if err := row.Scan(dst...); err != nil {
		return v, err
	}
	if percent != nil {
		v.DiscountPercent = *percent
	}
	if holdMS != nil {
		v.HoldTTL = time.Duration(*holdMS) * time.Millisecond
	}
	v.Paused = !active
	return v, nil
}

// definitionArgs are the editable columns of v, in voucherColumns' order from discount_amount
// to hold_ttl_ms (flash_sale left out), as the statements below take them.
func definitionArgs(v voucher.Voucher) []any {
	var percent *int
	if v.DiscountPercent != 0 {
		percent = &v.DiscountPercent
	}
	var holdMS *int64
	if v.HoldTTL > 0 {
		ms := v.HoldTTL.Milliseconds()
		holdMS = &ms
	}
	return []any{v.DiscountAmount, percent, v.MaxDiscountAmount, v.MinOrderAmount, v.TotalLimit, v.PerUserLimit,
		v.StartsAt, v.EndsAt, !v.Paused, holdMS}
}

// CreateVoucher inserts v at revision 1; ErrVoucherExists if its code is taken.
func (s *Store) CreateVoucher(ctx context.Context, v voucher.Voucher) error {
	args := append([]any{v.Code, v.FlashSale}, definitionArgs(v)...)
	_, err := s.pool.Exec(ctx, `INSERT INTO vouchers (code, flash_sale, discount_amount, discount_percent,
			max_discount_amount, min_order_amount, total_limit, per_user_limit, starts_at, ends_at, active, hold_ttl_ms)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`, args...)
	if isUnique(err, "vouchers_pkey") {
		return voucher.ErrVoucherExists
	}
	if err != nil {
		return fmt.Errorf("create voucher %s: %w", v.Code, err)
	}
	return nil
}

const voucherSQL = `SELECT ` + voucherColumns + ` FROM vouchers WHERE code = $1`

// Voucher reads a voucher's definition.
func (s *Store) Voucher(ctx context.Context, code string) (voucher.Voucher, error) {
	v, err := scanVoucher(s.pool.QueryRow(ctx, voucherSQL, code))
	if errors.Is(err, pgx.ErrNoRows) {
		return voucher.Voucher{}, voucher.ErrVoucherNotFound
	}
	if err != nil {
		return voucher.Voucher{}, fmt.Errorf("read voucher %s: %w", code, err)
	}
	return v, nil
}

// Stats reads a voucher with its used_count and redemption counts by status.
func (s *Store) Stats(ctx context.Context, code string) (voucher.Usage, error) {
	var st voucher.Usage
	v, err := scanVoucher(s.pool.QueryRow(ctx, `SELECT `+voucherColumns+`, used_count FROM vouchers WHERE code = $1`, code), &st.UsedCount)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, voucher.ErrVoucherNotFound
	}
	if err != nil {
		return st, fmt.Errorf("read voucher %s: %w", code, err)
	}
	st.Voucher = v
	st.ByStatus = map[string]int{wire.StatusReserved: 0, wire.StatusConfirmed: 0, wire.StatusReleased: 0, wire.StatusRefunded: 0}
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM redemptions WHERE voucher_code = $1 GROUP BY status`, code)
	if err != nil {
		return st, fmt.Errorf("count redemptions of %s: %w", code, err)
	}
	var status string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error { st.ByStatus[status] = n; return nil })
	if err != nil {
		return st, fmt.Errorf("count redemptions of %s: %w", code, err)
	}
	return st, nil
}

// EditVoucher changes a voucher in one transaction: its row locked FOR UPDATE first (so no
// reservation, release, refund or other edit of it commits meanwhile: they take FOR NO KEY
// UPDATE, or KEY SHARE through the redemptions' trigger), edit decides, hold runs under the lock
// when something changed, then the new definition is written with the next revision and the
// change recorded, and committed. See voucher.Store.
func (s *Store) EditVoucher(ctx context.Context, code string, at time.Time, edit func(voucher.Voucher, int) (voucher.Voucher, error),
	hold func(context.Context, voucher.Voucher, voucher.Voucher) error) (voucher.Voucher, voucher.Voucher, error) {
	var before, after voucher.Voucher
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return before, after, notWritten(err, "edit voucher %s: begin", code)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var used int
	before, err = scanVoucher(tx.QueryRow(ctx, `SELECT `+voucherColumns+`, used_count FROM vouchers WHERE code = $1 FOR UPDATE`, code), &used)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return before, after, voucher.ErrVoucherNotFound
	case err != nil:
		return before, after, failed(err, "edit voucher %s: lock it", code)
	}
	if after, err = edit(before, used); err != nil {
		return before, before, err
	}
	was, now := voucher.Diff(before, after)
	if len(now) == 0 {
		return before, before, nil // nothing to write; the rollback ends the lock
	}
	after.Revision = before.Revision + 1
	after.Opened = before.Opened || !at.Before(before.StartsAt) // as the statement below sets it
	if err := hold(ctx, before, after); err != nil {
		return before, before, err
	}
	wasJSON, err1 := json.Marshal(was)
	nowJSON, err2 := json.Marshal(now)
	if err := errors.Join(err1, err2); err != nil {
		return before, before, notWritten(err, "edit voucher %s: encode the change", code)
	}
	args := append([]any{code, after.Revision, at, wasJSON, nowJSON}, definitionArgs(after)...)
	if _, err := tx.Exec(ctx, `WITH changed AS (
			UPDATE vouchers SET revision = $2, discount_amount = $6, discount_percent = $7, max_discount_amount = $8,
				min_order_amount = $9, total_limit = $10, per_user_limit = $11, starts_at = $12, ends_at = $13,
				active = $14, hold_ttl_ms = $15, opened = opened OR starts_at <= $3
			WHERE code = $1 RETURNING code)
		INSERT INTO voucher_changes (voucher_code, revision, changed_at, before, after)
		SELECT code, $2, $3, $4, $5 FROM changed`, args...); err != nil {
		return before, before, failed(err, "edit voucher %s: write revision %d", code, after.Revision)
	}
	if err := tx.Commit(ctx); err != nil {
		return before, before, outcomeUnknown(err, "edit voucher %s: commit revision %d", code, after.Revision)
	}
	return before, after, nil
}

// WithVoucher runs fn with the voucher read FOR KEY SHARE, in a transaction held while fn runs:
// an edit (FOR UPDATE) waits for it, reservations (FOR NO KEY UPDATE) do not.
func (s *Store) WithVoucher(ctx context.Context, code string, fn func(context.Context, voucher.Voucher) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		v, err := scanVoucher(tx.QueryRow(ctx, `SELECT `+voucherColumns+` FROM vouchers WHERE code = $1 FOR KEY SHARE`, code))
		if errors.Is(err, pgx.ErrNoRows) {
			return voucher.ErrVoucherNotFound
		}
		if err != nil {
			return fmt.Errorf("read voucher %s under its lock: %w", code, err)
		}
		return fn(ctx, v)
	})
}

// DeleteVoucher deletes a voucher without redemptions. The trigger of migration 00003 refuses
// one with redemptions; a reservation committing at the same time serializes with the delete
// on the voucher's row, so either it is written first and the delete refused, or it finds no
// voucher.
func (s *Store) DeleteVoucher(ctx context.Context, code string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM vouchers WHERE code = $1`, code)
	switch {
	case isForeignKey(err, "redemptions_match_voucher"):
		return voucher.ErrVoucherInUse
	case err != nil:
		return fmt.Errorf("delete voucher %s: %w", code, err)
	case tag.RowsAffected() == 0:
		return voucher.ErrVoucherNotFound
	}
	return nil
}
