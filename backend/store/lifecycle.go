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
	switch r.Status {
	case wire.StatusReleased:
		return r, voucher.ErrReleased
	case wire.StatusRefunded:
		return r, voucher.ErrRefunded
	}
	return r, nil
}

// Release releases a RESERVED redemption and takes it off used_count in one transaction.
func (s *Store) Release(ctx context.Context, code, orderID string, now time.Time) (voucher.Redemption, bool, error) {
	r, released, err := s.giveUpUse(ctx, code, orderID, wire.StatusReserved, wire.StatusReleased, "released_at", now)
	if err != nil {
		return r, false, fmt.Errorf("release %s/%s: %w", code, orderID, err)
	}
	if released {
		return r, true, nil
	}
	r, err = s.redemptionOf(ctx, code, orderID)
	if err != nil {
		return r, false, fmt.Errorf("release %s/%s: %w", code, orderID, err)
	}
	switch r.Status {
	case wire.StatusConfirmed:
		return r, false, voucher.ErrConfirmed
	case wire.StatusRefunded:
		return r, false, voucher.ErrRefunded
	}
	return r, false, nil
}

// Refund refunds a CONFIRMED redemption and takes it off used_count in one transaction.
func (s *Store) Refund(ctx context.Context, code, orderID string, now time.Time) (voucher.Redemption, bool, error) {
	r, refunded, err := s.giveUpUse(ctx, code, orderID, wire.StatusConfirmed, wire.StatusRefunded, "refunded_at", now)
	if err != nil {
		return r, false, fmt.Errorf("refund %s/%s: %w", code, orderID, err)
	}
	if refunded {
		return r, true, nil
	}
	r, err = s.redemptionOf(ctx, code, orderID)
	if err != nil {
		return r, false, fmt.Errorf("refund %s/%s: %w", code, orderID, err)
	}
	switch r.Status {
	case wire.StatusReserved:
		return r, false, voucher.ErrNotConfirmed
	case wire.StatusReleased:
		return r, false, voucher.ErrReleased
	}
	return r, false, nil
}

// giveUpUse moves the order's redemption from status from to status to, stamping the column at
// (released_at or refunded_at: constants of this package, never input) with now, and takes its use
// off used_count, in one transaction that takes the voucher row lock first: the lock order every
// writer follows (see the package comment), so the status check under it holds however many
// callers, on however many backends, send it at once. done is false when the order was not in
// status from (nothing changed).
func (s *Store) giveUpUse(ctx context.Context, code, orderID, from, to, at string, now time.Time) (r voucher.Redemption, done bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM vouchers WHERE code = $1 FOR NO KEY UPDATE`, code).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return voucher.ErrVoucherNotFound
			}
			return err
		}
		var err error
		r, err = scanRedemption(tx.QueryRow(ctx, `UPDATE redemptions SET status = $4, `+at+` = $3
			WHERE voucher_code = $1 AND order_id = $2 AND status = $5
			RETURNING `+redemptionColumns, code, orderID, now, to, from))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		done = true
		_, err = tx.Exec(ctx, `UPDATE vouchers SET used_count = used_count - 1 WHERE code = $1`, code)
		return err
	})
	return r, done, err
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
