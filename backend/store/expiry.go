package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"vouchergate/backend/voucher"
)

// ExpireHolds releases up to limit RESERVED redemptions whose hold expired at now, voucher by
// voucher, each voucher in one transaction that also takes them off used_count. It follows the
// lock order (voucher row first), and the status check under that lock means several backends
// running it at once never release a redemption twice. It returns what it released.
func (s *Store) ExpireHolds(ctx context.Context, now time.Time, limit int) ([]voucher.Redemption, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT voucher_code FROM redemptions
		WHERE status = 'RESERVED' AND hold_expires_at <= $1 LIMIT $2`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("expire holds: find vouchers: %w", err)
	}
	codes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("expire holds: find vouchers: %w", err)
	}
	var released []voucher.Redemption
	for _, code := range codes {
		if len(released) >= limit {
			break
		}
		got, err := s.expireVoucher(ctx, code, now, limit-len(released))
		if err != nil {
			return released, err
		}
		released = append(released, got...)
	}
	return released, nil
}

func (s *Store) expireVoucher(ctx context.Context, code string, now time.Time, limit int) ([]voucher.Redemption, error) {
	var released []voucher.Redemption
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM vouchers WHERE code = $1 FOR NO KEY UPDATE`, code); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE redemptions SET status = 'RELEASED', released_at = $2
			WHERE id IN (SELECT id FROM redemptions WHERE voucher_code = $1 AND status = 'RESERVED'
				AND hold_expires_at <= $2 ORDER BY hold_expires_at LIMIT $3)
			AND status = 'RESERVED'
			RETURNING `+redemptionColumns, code, now, limit)
		if err != nil {
			return err
		}
		released, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.Redemption, error) { return scanRedemption(row) })
		if err != nil || len(released) == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE vouchers SET used_count = used_count - $2 WHERE code = $1`, code, len(released))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("expire holds of %s: %w", code, err)
	}
	return released, nil
}

// FlashVouchers lists the flash vouchers that end after since.
func (s *Store) FlashVouchers(ctx context.Context, since time.Time) ([]voucher.Voucher, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+voucherColumns+` FROM vouchers WHERE flash_sale AND ends_at > $1 ORDER BY code`, since)
	if err != nil {
		return nil, fmt.Errorf("list flash vouchers: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.Voucher, error) { return scanVoucher(row) })
	if err != nil {
		return nil, fmt.Errorf("list flash vouchers: %w", err)
	}
	return list, nil
}
