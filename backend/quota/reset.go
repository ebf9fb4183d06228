package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"vouchergate/lua"
	"vouchergate/shared/wire"
)

// Reset is a reset of an identity's counters, as recorded in quota_resets.
type Reset struct {
	ID           int64
	BizID        int64
	IdentityType string
	Identity     string
	Dimension    string // "": every counter of the identity
	ResetAt      time.Time
	// Outcome is ResetDone once Redis answered, with what the counters held in Cleared;
	// ResetUnknown when it did not (the reset may or may not have run).
	Outcome ResetOutcome
	Cleared []Cleared
}

// ResetOutcome says whether a reset is known to have run.
type ResetOutcome string

// Reset outcomes.
const (
	ResetDone    ResetOutcome = "DONE"
	ResetUnknown ResetOutcome = "UNKNOWN"
)

// Cleared is one counter a reset set to zero, with what it held.
type Cleared struct {
	Dimension string
	Window    Window
	Used      int64
}

// ResetCounters sets an identity's counters in their current windows to zero: those of
// dimension (an item's dimension such as "ITEM:1001", "*" for the counter of every item, or
// "NAME:*" for every counter of that name), or every counter of the identity when dimension is
// "" (those GET /quotas/usage lists without a dimension, and every wildcard rule's counter its
// index holds, past the ones usage lists). A deduct taken before the reset then
// gives back nothing on those counters when rolled back: the reset forgave it. Counters of
// earlier periods are left to expire.
//
// The reset is written to quota_resets before Redis is asked (outcome UNKNOWN) and completed
// with what it cleared once Redis answered (DONE), so that every reset that may have run is on
// record. A reset is not idempotent: sent again, it clears what was counted in between.
//
// Errors: ErrInvalid, ErrUnavailable (nothing done), ErrResetUnknown with ErrUnavailable (the
// record says UNKNOWN: look at the counters before sending it again).
func (s *Service) ResetCounters(ctx context.Context, bizID int64, identityType, identity, dimension string) (Reset, error) {
	if err := validateReset(bizID, identityType, identity, dimension); err != nil {
		return Reset{}, err
	}
	now := s.cfg.Clock.Now()
	st, _, err := s.identityCounters(ctx, bizID, identityType, identity, nil, now, 0)
	if err != nil {
		return Reset{}, unavailable("reset quota counters", err)
	}
	kept := st.counters[:0]
	for _, c := range st.counters {
		if resetMatches(dimension, c.dimension) {
			kept = append(kept, c)
		}
	}
	st.counters = kept
	r := Reset{BizID: bizID, IdentityType: identityType, Identity: identity, Dimension: dimension,
		ResetAt: now.Truncate(time.Microsecond), Outcome: ResetUnknown, Cleared: []Cleared{}}
	if err := s.store.pool.QueryRow(ctx, `INSERT INTO quota_resets (biz_id, identity_type, identity, dimension, reset_at, outcome)
		VALUES ($1, $2, $3, NULLIF($4, ''), $5, 'UNKNOWN') RETURNING id`, bizID, identityType, identity, dimension, r.ResetAt).Scan(&r.ID); err != nil {
		return Reset{}, unavailable("record a quota reset", err)
	}
	held, err := s.scripts.reset(ctx, &st, now.UnixMilli())
	if err != nil {
		return Reset{}, fmt.Errorf("%w: %w", ErrResetUnknown, unavailable(fmt.Sprintf("reset quota counters (reset %d recorded as UNKNOWN)", r.ID), err))
	}
	s.metrics.resets.Add(1)
	for i := range st.counters {
		if held[i] > 0 {
			r.Cleared = append(r.Cleared, Cleared{Dimension: st.counters[i].dimension, Window: *st.counters[i].window, Used: held[i]})
		}
	}
	r.Outcome = ResetDone
	if _, err := s.store.pool.Exec(ctx, `UPDATE quota_resets SET outcome = 'DONE', cleared = $2 WHERE id = $1`, r.ID, clearedJSON(r.Cleared)); err != nil {
		// the counters are reset: answer so, and leave the record saying it may have run
		s.cfg.Log.Warn("quota: counters reset, but the record stays UNKNOWN", "reset", r.ID, "cleared", r.Cleared, "err", err)
	}
	return r, nil
}

func validateReset(bizID int64, identityType, identity, dimension string) error {
	if bizID <= 0 {
		return invalid("bizId must be a positive integer")
	}
	if err := checkIdentityType("identityType", identityType); err != nil {
		return err
	}
	if err := checkID("identity", identity, wire.MaxIdentityLen); err != nil {
		return err
	}
	if dimension != "" {
		return checkDimension("dimension", dimension, true)
	}
	return nil
}

// resetMatches tells whether a reset of dimension (as ResetCounters takes it) clears the
// counter of dimension d.
func resetMatches(dimension, d string) bool {
	switch {
	case dimension == "" || dimension == d:
		return true
	case strings.HasSuffix(dimension, ":*"):
		return len(d) > len(dimension)-1 && strings.HasPrefix(d, dimension[:len(dimension)-1])
	}
	return false
}

// clearedJSON is what the record keeps of the cleared counters.
func clearedJSON(cs []Cleared) []byte {
	type entry struct {
		Dimension string `json:"dimension"`
		Window    string `json:"window"`
		Used      int64  `json:"used"`
	}
	out := make([]entry, len(cs))
	for i, c := range cs {
		out[i] = entry{c.Dimension, c.Window.ID(), c.Used}
	}
	b, _ := json.Marshal(out)
	return b
}

// Resets lists the resets of a business line, newest first, at most limit of them: of one
// identity when identityType and identity are given.
//
// Errors: ErrInvalid, ErrUnavailable.
func (s *Service) Resets(ctx context.Context, bizID int64, identityType, identity string, limit int) ([]Reset, error) {
	if bizID <= 0 {
		return nil, invalid("bizId must be a positive integer")
	}
	rows, err := s.store.pool.Query(ctx, `SELECT id, biz_id, identity_type, identity, coalesce(dimension, ''), reset_at, outcome, cleared
		FROM quota_resets WHERE biz_id = $1 AND ($2 = '' OR (identity_type = $2 AND identity = $3))
		ORDER BY id DESC LIMIT $4`, bizID, identityType, identity, limit)
	if err != nil {
		return nil, unavailable("list quota resets", err)
	}
	out, err := pgx.CollectRows(rows, scanReset)
	if err != nil {
		return nil, unavailable("list quota resets", err)
	}
	if out == nil {
		out = []Reset{}
	}
	return out, nil
}

func scanReset(row pgx.CollectableRow) (Reset, error) {
	var r Reset
	var outcome string
	var cleared []byte
	if err := row.Scan(&r.ID, &r.BizID, &r.IdentityType, &r.Identity, &r.Dimension, &r.ResetAt, &outcome, &cleared); err != nil {
		return Reset{}, err
	}
	r.Outcome, r.Cleared = ResetOutcome(outcome), []Cleared{}
	if cleared == nil {
		return r, nil
	}
	var entries []struct {
		Dimension string `json:"dimension"`
		Window    string `json:"window"`
		Used      int64  `json:"used"`
	}
	if err := json.Unmarshal(cleared, &entries); err != nil {
		return Reset{}, fmt.Errorf("quota reset %d: cleared: %w", r.ID, err)
	}
	for _, e := range entries {
		w, err := ParseWindowID(e.Window)
		if err != nil {
			return Reset{}, fmt.Errorf("quota reset %d: %w", r.ID, err)
		}
		r.Cleared = append(r.Cleared, Cleared{Dimension: e.Dimension, Window: w, Used: e.Used})
	}
	return r, nil
}

// resetBatch bounds the counters one quota_reset.lua call clears, so that an identity with
// thousands of wildcard counters does not hold Redis for one long script.
const resetBatch = 256

// reset runs quota_reset.lua on the step's counters, resetBatch at a time, and returns what
// each held.
func (sc *scripts) reset(ctx context.Context, st *step, nowMs int64) ([]int64, error) {
	out := make([]int64, 0, len(st.counters))
	for from := 0; from < len(st.counters); from += resetBatch {
		batch := st.counters[from:min(from+resetBatch, len(st.counters))]
		keys := make([]string, 1, 1+2*len(batch))
		keys[0] = resetsKey(st.base)
		args := make([]any, 2, 2+2*len(batch))
		args[0], args[1] = nowMs, len(batch)
		for i := range batch {
			c := &batch[i]
			keys = appendCounterKeys(keys, st.base, c.kind, c.seg, c.dimension)
			args = append(args, kindArg(c.kind), c.span)
		}
		s, err := sc.run(ctx, lua.QuotaReset, keys, args...).Text()
		if err != nil {
			return nil, err
		}
		us, err := parseUsed(withOldest(s), len(batch))
		if err != nil {
			return nil, fmt.Errorf("quota_reset.lua answered %q: %w", s, err)
		}
		for i := range us {
			out = append(out, us[i].used)
		}
	}
	return out, nil
}

// withOldest turns "a b c" into "a:0 b:0 c:0", parseUsed's form.
func withOldest(s string) string {
	if s == "" {
		return s
	}
	return strings.ReplaceAll(s, " ", ":0 ") + ":0"
}
