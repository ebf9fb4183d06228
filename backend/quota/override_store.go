package quota

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Overrides live in quota_overrides (migrations/00007_quota_platform.sql), each naming its rule
// by id; the rule's bizId, identityType, dimension and window are read with it.

const overrideSelect = `SELECT o.id, o.rule_id, r.biz_id, r.identity_type, r.dimension, r.window_id, o.identity,
	o.quota_limit, o.expires_at, o.created_at, o.updated_at
	FROM quota_overrides o JOIN quota_rules r ON r.id = o.rule_id`

func scanOverride(row pgx.Row) (Override, error) {
	var o Override
	var windowID string
	if err := row.Scan(&o.ID, &o.RuleID, &o.BizID, &o.IdentityType, &o.Dimension, &windowID, &o.Identity,
		&o.Limit, &o.ExpiresAt, &o.CreatedAt, &o.UpdatedAt); err != nil {
		return Override{}, err
	}
	w, err := ParseWindowID(windowID)
	if err != nil {
		return Override{}, err
	}
	o.Window = w
	return o, nil
}

func queryOverrides(ctx context.Context, q querier, sql string, args ...any) ([]Override, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Override
	for rows.Next() {
		o, err := scanOverride(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// putOverride creates o for the rule its bizId, identityType, dimension and window name, or
// replaces the limit and expiry of that rule's override for the identity. created tells which.
// It returns errNoRuleToOverride when no such rule exists, ErrTooManyOverrides when the rule
// holds the most overrides allowed.
func (s *ruleStore) putOverride(ctx context.Context, o Override) (saved Override, created bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// the rule's row lock serialises the overrides of one rule, so the count below holds,
		// and keeps the rule from being deleted meanwhile
		var ruleID int64
		err := tx.QueryRow(ctx, `SELECT id FROM quota_rules WHERE biz_id = $1 AND identity_type = $2 AND dimension = $3 AND window_id = $4 FOR UPDATE`,
			o.BizID, o.IdentityType, o.Dimension, o.Window.ID()).Scan(&ruleID)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNoRuleToOverride
		} else if err != nil {
			return err
		}
		var n int
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(bool_or(identity = $2), false) FROM quota_overrides WHERE rule_id = $1`,
			ruleID, o.Identity).Scan(&n, &exists); err != nil {
			return err
		}
		if !exists && n >= MaxOverridesPerRule {
			return ErrTooManyOverrides
		}
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO quota_overrides (rule_id, identity, quota_limit, expires_at)
			VALUES ($1, $2, $3, $4)
			ON CONFLICT (rule_id, identity)
			DO UPDATE SET quota_limit = EXCLUDED.quota_limit, expires_at = EXCLUDED.expires_at, updated_at = now()
			RETURNING id, (xmax = 0)`, ruleID, o.Identity, o.Limit, o.ExpiresAt).Scan(&id, &created); err != nil {
			return err
		}
		saved, err = scanOverride(tx.QueryRow(ctx, overrideSelect+` WHERE o.id = $1`, id))
		return err
	})
	return saved, created, err
}

// overrides lists the overrides not expired at now, by id, optionally of one bizId (0: all),
// one identityType and one identity ("": all).
func (s *ruleStore) overrides(ctx context.Context, bizID int64, identityType, identity string, now time.Time) ([]Override, error) {
	return queryOverrides(ctx, s.pool, overrideSelect+`
		WHERE (o.expires_at IS NULL OR o.expires_at > $1)
		AND ($2 = 0 OR r.biz_id = $2) AND ($3 = '' OR r.identity_type = $3) AND ($4 = '' OR o.identity = $4)
		ORDER BY o.id`, now, bizID, identityType, identity)
}

func (s *ruleStore) override(ctx context.Context, id int64) (Override, error) {
	o, err := scanOverride(s.pool.QueryRow(ctx, overrideSelect+` WHERE o.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Override{}, ErrOverrideNotFound
	}
	return o, err
}

func (s *ruleStore) deleteOverride(ctx context.Context, id int64) (Override, error) {
	var o Override
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if o, err = scanOverride(tx.QueryRow(ctx, overrideSelect+` WHERE o.id = $1 FOR UPDATE OF o`, id)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM quota_overrides WHERE id = $1`, id)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Override{}, ErrOverrideNotFound
	}
	return o, err
}
