package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// Confirm confirms a RESERVED redemption; a CONFIRMED one is returned unchanged.
func (s *Store) Confirm(ctx context.Context, code, orderID string, now time.Time) (voucher.Redemption, error) {
	r, err := scanRedemption(s.pool.QueryRow(ctx, `UPDATE redemptions SET status = 'CONFIRMED', confirmed_at = $3
		WHERE voucher_code = $1 AND order_id = $2 AND status = 'RESERVED'
		RETURNING `+redemptionColumns, code, orderID, now))
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("confirm %s/%s: %w", code, orderID, err)
	}
	r, err = s.redemptionOf(ctx, code, orderID)
	if err != nil {
		return r, fmt.Errorf("confirm %s/%s: %w", code, orderID, err)
	}
	if r.Status == wire.StatusReleased {
		return r, voucher.ErrReleased
	}
	return r, nil
}

// Release releases a RESERVED redemption and takes it off used_count in one transaction.
func (s *Store) Release(ctx context.Context, code, orderID string, now time.Time) (voucher.Redemption, bool, error) {
	var r voucher.Redemption
	released := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// the voucher row first: the lock order every writer follows (see the package comment)
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM vouchers WHERE code = $1 FOR NO KEY UPDATE`, code).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return voucher.ErrVoucherNotFound
			}
			return err
		}
		var err error
		r, err = scanRedemption(tx.QueryRow(ctx, `UPDATE redemptions SET status = 'RELEASED', released_at = $3
			WHERE voucher_code = $1 AND order_id = $2 AND status = 'RESERVED'
			RETURNING `+redemptionColumns, code, orderID, now))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		released = true
		_, err = tx.Exec(ctx, `UPDATE vouchers SET used_count = used_count - 1 WHERE code = $1`, code)
		return err
	})
	if err != nil {
		if errors.Is(err, voucher.ErrVoucherNotFound) {
			return r, false, err
		}
		return r, false, fmt.Errorf("release %s/%s: %w", code, orderID, err)
	}
	if released {
		return r, true, nil
	}
	r, err = s.redemptionOf(ctx, code, orderID)
	if err != nil {
		return r, false, fmt.Errorf("release %s/%s: %w", code, orderID, err)
	}
	if r.Status == wire.StatusConfirmed {
		return r, false, voucher.ErrConfirmed
	}
	return r, false, nil
}

// redemptionOf reads the voucher's redemption for orderID, telling an unknown voucher from an
// unknown reservation.
func (s *Store) redemptionOf(ctx context.Context, code, orderID string) (voucher.Redemption, error) {
	r, err := s.Redemption(ctx, orderID)
	if err == nil && r.VoucherCode == code {
		return r, nil
	}
	if err != nil && !errors.Is(err, voucher.ErrReservationNotFound) {
		return r, err
	}
	if _, err := s.Voucher(ctx, code); err != nil {
		return voucher.Redemption{}, err
	}
	return voucher.Redemption{}, voucher.ErrReservationNotFound
}
