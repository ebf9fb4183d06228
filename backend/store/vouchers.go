package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"vouchergate/backend/voucher"
)

const voucherColumns = `code, discount_amount, min_order_amount, total_limit, per_user_limit, starts_at, ends_at, flash_sale`

func scanVoucher(row pgx.Row, extra ...any) (voucher.Voucher, error) {
	var v voucher.Voucher
	dst := append([]any{&v.Code, &v.DiscountAmount, &v.MinOrderAmount, &v.TotalLimit, &v.PerUserLimit,
		&v.StartsAt, &v.EndsAt, &v.FlashSale}, extra...)
	err := row.Scan(dst...)
	return v, err
}

// CreateVoucher inserts v; ErrVoucherExists if its code is taken.
func (s *Store) CreateVoucher(ctx context.Context, v voucher.Voucher) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO vouchers (`+voucherColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		v.Code, v.DiscountAmount, v.MinOrderAmount, v.TotalLimit, v.PerUserLimit, v.StartsAt, v.EndsAt, v.FlashSale)
	if isUnique(err, "vouchers_pkey") {
		return voucher.ErrVoucherExists
	}
	if err != nil {
		return fmt.Errorf("create voucher %s: %w", v.Code, err)
	}
	return nil
}

// Voucher reads a voucher's definition.
func (s *Store) Voucher(ctx context.Context, code string) (voucher.Voucher, error) {
	v, err := scanVoucher(s.pool.QueryRow(ctx, `SELECT `+voucherColumns+` FROM vouchers WHERE code = $1`, code))
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
	st.ByStatus = map[string]int{"RESERVED": 0, "CONFIRMED": 0, "RELEASED": 0}
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
