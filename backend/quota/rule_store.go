package quota

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"vouchergate/shared/wire"
)

// ruleStore keeps rules in PostgreSQL (table quota_rules, migrations/00002_quota_rules.sql).
type ruleStore struct {
	pool *pgxpool.Pool
}

const ruleColumns = `id, biz_id, identity_type, dimension, quota_limit, window_type, timezone,
	rolling_ms, fixed_start, fixed_end, mode, created_at, updated_at`

func scanRule(row pgx.Row) (Rule, error) {
	var (
		r          Rule
		typ, mode  string
		tz         *string
		rollingMs  *int64
		start, end *time.Time
	)
	if err := row.Scan(&r.ID, &r.BizID, &r.IdentityType, &r.Dimension, &r.Limit, &typ, &tz,
		&rollingMs, &start, &end, &mode, &r.CreatedAt, &r.UpdatedAt); err != nil {
		return Rule{}, err
	}
	r.Mode = RuleMode(mode)
	var err error
	switch WindowType(typ) {
	case Day, Week, Month:
		if tz == nil {
			return Rule{}, fmt.Errorf("quota rule %d: %s window without a time zone", r.ID, typ)
		}
		r.Window, err = NewCalendarWindow(WindowType(typ), *tz)
	case Rolling:
		if rollingMs == nil {
			return Rule{}, fmt.Errorf("quota rule %d: rolling window without a size", r.ID)
		}
		r.Window, err = NewRollingWindow(time.Duration(*rollingMs) * time.Millisecond)
	case Fixed:
		if start == nil || end == nil {
			return Rule{}, fmt.Errorf("quota rule %d: fixed window without a period", r.ID)
		}
		r.Window, err = NewFixedWindow(*start, *end)
	default:
		err = fmt.Errorf("unknown window type %q", typ)
	}
	if err != nil {
		return Rule{}, fmt.Errorf("quota rule %d: %w", r.ID, err)
	}
	return r, nil
}

// all returns every rule, for the cache.
func (s *ruleStore) all(ctx context.Context) ([]Rule, error) {
	return s.query(ctx, `SELECT `+ruleColumns+` FROM quota_rules ORDER BY id`)
}

// snapshot reads what the cache holds, in one read-only transaction so the three agree: every
// rule, the overrides not expired at now, and the business lines that degrade OPEN.
func (s *ruleStore) snapshot(ctx context.Context, now time.Time) (rules []Rule, overrides []Override, open []int64, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if rules, err = queryRules(ctx, tx, `SELECT `+ruleColumns+` FROM quota_rules ORDER BY id`); err != nil {
			return err
		}
		if overrides, err = queryOverrides(ctx, tx, overrideSelect+` WHERE o.expires_at IS NULL OR o.expires_at > $1 ORDER BY o.id`, now); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT biz_id FROM quota_biz_settings WHERE when_unavailable = 'OPEN'`)
		if err != nil {
			return err
		}
		open, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	return rules, overrides, open, err
}

// list returns the rules of bizID, or every rule when bizID is 0.
func (s *ruleStore) list(ctx context.Context, bizID int64) ([]Rule, error) {
	if bizID == 0 {
		return s.all(ctx)
	}
	return s.query(ctx, `SELECT `+ruleColumns+` FROM quota_rules WHERE biz_id = $1 ORDER BY id`, bizID)
}

func (s *ruleStore) query(ctx context.Context, sql string, args ...any) ([]Rule, error) {
	return queryRules(ctx, s.pool, sql, args...)
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func queryRules(ctx context.Context, q querier, sql string, args ...any) ([]Rule, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Rule
	for rows.Next() {
		r, err := scanRule(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *ruleStore) get(ctx context.Context, id int64) (Rule, error) {
	r, err := scanRule(s.pool.QueryRow(ctx, `SELECT `+ruleColumns+` FROM quota_rules WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Rule{}, ErrRuleNotFound
	}
	return r, err
}

// put creates r, or changes the limit and mode of the rule with the same bizId, identityType,
// dimension and window. created tells which.
func (s *ruleStore) put(ctx context.Context, r Rule) (saved Rule, created bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// serialise puts of one bizId and identityType, so the count below holds
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('quota_rules:' || $1::bigint || ':' || $2::text, 0))`,
			r.BizID, r.IdentityType); err != nil {
			return err
		}
		var n int
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(bool_or(dimension = $3 AND window_id = $4), false)
			FROM quota_rules WHERE biz_id = $1 AND identity_type = $2`,
			r.BizID, r.IdentityType, r.Dimension, r.Window.ID()).Scan(&n, &exists); err != nil {
			return err
		}
		if !exists && n >= wire.MaxQuotaRulesPerType {
			return ErrTooManyRules
		}
		var tz *string
		var rollingMs *int64
		var start, end *time.Time
		switch r.Window.Type {
		case Day, Week, Month:
			tz = &r.Window.Timezone
		case Rolling:
			ms := r.Window.Size.Milliseconds()
			rollingMs = &ms
		case Fixed:
			start, end = &r.Window.Start, &r.Window.End
		}
		row := tx.QueryRow(ctx, `INSERT INTO quota_rules
			(biz_id, identity_type, dimension, quota_limit, window_type, timezone, rolling_ms, fixed_start, fixed_end, window_id, mode)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
			ON CONFLICT (biz_id, identity_type, dimension, window_id)
			DO UPDATE SET quota_limit = EXCLUDED.quota_limit, mode = EXCLUDED.mode, updated_at = now()
			RETURNING `+ruleColumns+`, (xmax = 0)`,
			r.BizID, r.IdentityType, r.Dimension, r.Limit, string(r.Window.Type), tz, rollingMs, start, end, r.Window.ID(), string(r.mode()))
		saved, err = scanRuleCreated(row, &created)
		return err
	})
	return saved, created, err
}

func scanRuleCreated(row pgx.Row, created *bool) (Rule, error) {
	return scanRule(rowWithTail{row, created})
}

// rowWithTail scans one extra trailing column into tail.
type rowWithTail struct {
	row  pgx.Row
	tail *bool
}

func (r rowWithTail) Scan(dest ...any) error { return r.row.Scan(append(dest, r.tail)...) }

func (s *ruleStore) delete(ctx context.Context, id int64) (Rule, error) {
	r, err := scanRule(s.pool.QueryRow(ctx, `DELETE FROM quota_rules WHERE id = $1 RETURNING `+ruleColumns, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Rule{}, ErrRuleNotFound
	}
	return r, err
}
