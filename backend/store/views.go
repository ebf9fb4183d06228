package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// The admin lists (voucher.Views). Each page is one statement, so one snapshot, that starts
// from the previous page's last key (keyset pagination): no OFFSET, so a page does not cost more
// the further the list goes.

// voucherPageQuery reads a page of vouchers by the primary key, of those f keeps. Its counts
// come from redemptions_voucher_status (as Stats's do), so a page costs the sum of its
// vouchers' redemption counts; more asks whether any code the filter keeps follows the page's
// last one. A filter walks the primary key past the vouchers it leaves out: vouchers are few
// against redemptions, and an operator's list is no hot path.
func voucherPageQuery(f voucher.VoucherFilter, limit int) (string, []any) {
	cond := ``
	args := []any{f.After, limit}
	if f.Active != nil {
		args = append(args, *f.Active)
		cond += ` AND active = $` + strconv.Itoa(len(args))
	}
	if f.Ended != nil {
		args = append(args, f.Now)
		op := ` > `
		if *f.Ended {
			op = ` <= `
		}
		cond += ` AND ends_at` + op + `$` + strconv.Itoa(len(args))
	}
	return `WITH page AS (
		SELECT ` + voucherColumns + `, used_count FROM vouchers WHERE code > $1` + cond + ` ORDER BY code LIMIT $2)
	SELECT p.code, p.discount_amount, p.discount_percent, p.max_discount_amount, p.min_order_amount, p.total_limit,
		p.per_user_limit, p.starts_at, p.ends_at, p.flash_sale, p.active, p.hold_ttl_ms, p.revision, p.opened, p.used_count,
		c.reserved, c.confirmed, c.released, c.refunded,
		EXISTS (SELECT 1 FROM vouchers WHERE code > (SELECT max(code) FROM page)` + cond + `)
	FROM page p CROSS JOIN LATERAL (
		SELECT count(*) FILTER (WHERE status = 'RESERVED') AS reserved,
			count(*) FILTER (WHERE status = 'CONFIRMED') AS confirmed,
			count(*) FILTER (WHERE status = 'RELEASED') AS released,
			count(*) FILTER (WHERE status = 'REFUNDED') AS refunded
		FROM redemptions r WHERE r.voucher_code = p.code) c
	ORDER BY p.code`, args
}

// VoucherPage reads up to limit vouchers that f keeps after the code f.After, with their counts
// by status.
func (s *Store) VoucherPage(ctx context.Context, f voucher.VoucherFilter, limit int) ([]voucher.Usage, bool, error) {
	q, args := voucherPageQuery(f, limit)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, false, fmt.Errorf("list vouchers after %q: %w", f.After, err)
	}
	page := make([]voucher.Usage, 0, limit)
	var more bool
	for rows.Next() {
		var u voucher.Usage
		var reserved, confirmed, released, refunded int
		u.Voucher, err = scanVoucher(rows, &u.UsedCount, &reserved, &confirmed, &released, &refunded, &more)
		if err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("list vouchers after %q: %w", f.After, err)
		}
		u.ByStatus = map[string]int{wire.StatusReserved: reserved, wire.StatusConfirmed: confirmed,
			wire.StatusReleased: released, wire.StatusRefunded: refunded}
		page = append(page, u)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list vouchers after %q: %w", f.After, err)
	}
	return page, more, nil
}

// decodeNumbers decodes a JSON object into m with numbers kept as json.Number.
func decodeNumbers(b []byte, m *map[string]any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(m)
}

// ChangePage reads up to limit changes of the voucher code with revisions above after, in
// revision order (the primary key), asking for one more to learn whether more follow.
func (s *Store) ChangePage(ctx context.Context, code string, after int64, limit int) ([]voucher.Change, bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT revision, changed_at, before, after FROM voucher_changes
		WHERE voucher_code = $1 AND revision > $2 ORDER BY revision LIMIT $3`, code, after, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list changes of %s after %d: %w", code, after, err)
	}
	page, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (voucher.Change, error) {
		var c voucher.Change
		var before, after []byte
		if err := row.Scan(&c.Revision, &c.At, &before, &after); err != nil {
			return c, err
		}
		// amounts are int64: json.Number keeps those beyond float64's 2^53 exact
		err1, err2 := decodeNumbers(before, &c.Before), decodeNumbers(after, &c.After)
		return c, errors.Join(err1, err2)
	})
	if err != nil {
		return nil, false, fmt.Errorf("list changes of %s after %d: %w", code, after, err)
	}
	if len(page) > limit {
		return page[:limit], true, nil
	}
	return page, false, nil
}

const redemptionRecordColumns = `id, ` + redemptionColumns + `, confirmed_at, released_at, refunded_at`

// RedemptionPage reads up to limit redemptions of the voucher code with ids after f.After, in id
// order, asking for one more to learn whether more follow. Only the filters that are set become
// conditions, so each combination is its own statement with its own plan. With the customer,
// redemptions_voucher_customer finds just that customer's rows (a few: per_user_limit active
// ones and what they released). Without it the planner takes the voucher's rows (of the status)
// from redemptions_voucher_status and sorts them by id, or walks the primary key from After
// until the page is full (reading other vouchers' later rows on the way), whichever it finds
// cheaper. One statement with optional conditions ("$4 IS NULL OR customer_id = $4") could
// get one generic plan for every filter, and that plan could not use the customer's index.
func (s *Store) RedemptionPage(ctx context.Context, code string, f voucher.RedemptionFilter, limit int) ([]voucher.RedemptionRecord, bool, error) {
	q, args := redemptionPageQuery(code, f, limit+1)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, false, fmt.Errorf("list redemptions of %s after %d: %w", code, f.After, err)
	}
	page := make([]voucher.RedemptionRecord, 0, limit+1)
	var r voucher.RedemptionRecord
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.VoucherCode, &r.CustomerID, &r.OrderID, &r.Status,
		&r.OrderAmount, &r.DiscountAmount, &r.ReservedAt, &r.HoldExpiresAt, &r.ConfirmedAt, &r.ReleasedAt, &r.RefundedAt},
		func() error {
			page = append(page, r)
			r.ConfirmedAt, r.ReleasedAt, r.RefundedAt = nil, nil, nil // the next row's times in their own memory, not this row's
			return nil
		})
	if err != nil {
		return nil, false, fmt.Errorf("list redemptions of %s after %d: %w", code, f.After, err)
	}
	if len(page) > limit {
		return page[:limit], true, nil
	}
	return page, false, nil
}

// redemptionPageQuery is the statement reading up to limit redemptions of code that match f.
func redemptionPageQuery(code string, f voucher.RedemptionFilter, limit int) (string, []any) {
	q := `SELECT ` + redemptionRecordColumns + ` FROM redemptions WHERE voucher_code = $1 AND id > $2`
	args := []any{code, f.After}
	if f.Status != "" {
		args = append(args, f.Status)
		q += ` AND status = $` + strconv.Itoa(len(args))
	}
	if f.CustomerID != "" {
		args = append(args, f.CustomerID)
		q += ` AND customer_id = $` + strconv.Itoa(len(args))
	}
	args = append(args, limit)
	return q + ` ORDER BY id LIMIT $` + strconv.Itoa(len(args)), args
}
