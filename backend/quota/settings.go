package quota

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// WhenUnavailable is what a business line's deducts do when Redis cannot be reached.
type WhenUnavailable string

// What a business line's deducts do without Redis.
const (
	// Closed answers ErrUnavailable (503): nothing is sold past a limit, nothing is sold at all.
	// The default.
	Closed WhenUnavailable = "CLOSED"
	// Open answers a degraded pass (200, Degraded) that counts nothing: sales go on, limits are
	// not enforced until Redis answers again.
	Open WhenUnavailable = "OPEN"
)

// Setting is a business line's quota settings.
type Setting struct {
	BizID           int64
	WhenUnavailable WhenUnavailable
	UpdatedAt       time.Time
}

// PutSetting stores a business line's setting. This backend applies it at once; the others
// are told over NATS, as for rules.
//
// Errors: ErrInvalid, ErrUnavailable.
func (s *Service) PutSetting(ctx context.Context, st Setting) (Setting, error) {
	if st.BizID <= 0 {
		return Setting{}, invalid("bizId must be a positive integer")
	}
	if st.WhenUnavailable != Closed && st.WhenUnavailable != Open {
		return Setting{}, invalid("whenUnavailable %q must be CLOSED or OPEN", clip(string(st.WhenUnavailable)))
	}
	row := s.store.pool.QueryRow(ctx, `INSERT INTO quota_biz_settings (biz_id, when_unavailable) VALUES ($1, $2)
		ON CONFLICT (biz_id) DO UPDATE SET when_unavailable = EXCLUDED.when_unavailable, updated_at = now()
		RETURNING biz_id, when_unavailable, updated_at`, st.BizID, string(st.WhenUnavailable))
	saved, err := scanSetting(row)
	if err != nil {
		return Setting{}, unavailable("put quota setting", err)
	}
	s.changed(ctx)
	return saved, nil
}

// Settings returns the settings stored, by bizId, of one bizId (0: every one). A business line
// with none is CLOSED.
//
// Errors: ErrUnavailable.
func (s *Service) Settings(ctx context.Context, bizID int64) ([]Setting, error) {
	rows, err := s.store.pool.Query(ctx, `SELECT biz_id, when_unavailable, updated_at FROM quota_biz_settings
		WHERE $1 = 0 OR biz_id = $1 ORDER BY biz_id`, bizID)
	if err != nil {
		return nil, unavailable("list quota settings", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Setting, error) { return scanSetting(r) })
	if err != nil {
		return nil, unavailable("list quota settings", err)
	}
	if out == nil {
		out = []Setting{}
	}
	return out, nil
}

func scanSetting(row pgx.Row) (Setting, error) {
	var st Setting
	var w string
	err := row.Scan(&st.BizID, &w, &st.UpdatedAt)
	st.WhenUnavailable = WhenUnavailable(w)
	return st, err
}
