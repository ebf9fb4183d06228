package quota

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/lua"
)

// gate runs the quota scripts on Redis (single or Cluster): one script call per identity.
type gate struct {
	rdb     redis.UniversalClient
	idemTTL any  // ms, as the scripts take it; boxed once
	cluster bool // keys of different hash tags live on different nodes
}

// Step outcomes, as quota_deduct.lua returns them.
const (
	stepTaken      = 1
	stepReplayed   = 0
	stepFull       = -1
	stepRolledBack = -2
	stepReused     = -3
)

// stepResult is what quota_deduct.lua answered for one identity.
type stepResult struct {
	status int64
	used   string // taken or replayed: "used:oldest" per counter
	record string // replayed: the counters of the first attempt
	full   int    // full: the index of the counter without room
	fullAt used   // full: that counter's state
}

func (g *gate) deductCall(st *step, idemKey, attempt string, nowMs int64) ([]string, []any) {
	keys := make([]string, 1, 1+2*len(st.counters))
	keys[0] = recordKey(st.base, idemKey)
	args := make([]any, 7, 7+4*len(st.counters))
	args[0] = nowMs
	args[1] = g.idemTTL
	args[2] = attempt
	args[3] = st.fp
	args[4] = idemKey
	args[5] = appendRecord(make([]byte, 0, 96*len(st.counters)), st.counters)
	args[6] = len(st.counters)
	for i := range st.counters {
		c := &st.counters[i]
		keys = appendCounterKeys(keys, st.base, c.kind, c.seg, c.dimension)
		args = append(args, kindArg(c.kind), c.limitArg, c.amount, c.span)
	}
	return keys, args
}

func kindArg(k byte) any {
	if k == 'C' {
		return "C"
	}
	return "R"
}

func parseStep(v any) (stepResult, error) {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		return stepResult{}, fmt.Errorf("quota_deduct.lua answered %v", v)
	}
	var r stepResult
	r.status, _ = a[0].(int64)
	switch {
	case r.status == stepTaken && len(a) == 2:
		r.used, _ = a[1].(string)
	case r.status == stepReplayed && len(a) == 3:
		r.record, _ = a[1].(string)
		r.used, _ = a[2].(string)
	case r.status == stepFull && len(a) == 4:
		i, _ := a[1].(int64)
		r.full = int(i) - 1
		u, _ := a[2].(string)
		o, _ := a[3].(string)
		var err1, err2 error
		r.fullAt.used, err1 = strconv.ParseInt(u, 10, 64)
		r.fullAt.oldest, err2 = parseScore(o)
		if err1 != nil || err2 != nil {
			return r, fmt.Errorf("quota_deduct.lua answered %v", v)
		}
	case r.status == stepRolledBack || r.status == stepReused:
	default:
		return r, fmt.Errorf("quota_deduct.lua answered %v", v)
	}
	return r, nil
}

// deduct runs one identity's step.
func (g *gate) deduct(ctx context.Context, st *step, idemKey, attempt string, nowMs int64) (stepResult, error) {
	keys, args := g.deductCall(st, idemKey, attempt, nowMs)
	v, err := lua.QuotaDeduct.Run(ctx, g.rdb, keys, args...).Result()
	if err != nil {
		return stepResult{}, err
	}
	return parseStep(v)
}

// registerAndDeduct notes the request's identities and runs the first identity's step.
// registered is false if the idemKey was rolled back; then nothing is taken. A step never
// counts before its request is registered, so a rollback always finds what a deduct took: on a
// single Redis both are one script call; on a cluster the request's record lives on another
// node and is registered first, at the price of a round trip.
func (g *gate) registerAndDeduct(ctx context.Context, reqKey string, tags []string, st *step, idemKey, attempt string, nowMs int64) (registered bool, r stepResult, err error) {
	keys, args := g.deductCall(st, idemKey, attempt, nowMs)
	if !g.cluster {
		keys = append(keys, reqKey)
		for _, t := range tags {
			args = append(args, t)
		}
		v, err := lua.QuotaDeduct.Run(ctx, g.rdb, keys, args...).Result()
		if err != nil {
			return false, stepResult{}, err
		}
		r, err := parseStep(v)
		return r.status != stepRolledBack, r, err
	}
	regArgs := make([]any, 0, 1+len(tags))
	regArgs = append(regArgs, g.idemTTL)
	for _, t := range tags {
		regArgs = append(regArgs, t)
	}
	n, err := lua.QuotaRegister.Run(ctx, g.rdb, []string{reqKey}, regArgs...).Int64()
	if err != nil {
		return false, stepResult{}, fmt.Errorf("register: %w", err)
	}
	if n != 1 {
		return false, stepResult{status: stepRolledBack}, nil
	}
	r, err = g.deduct(ctx, st, idemKey, attempt, nowMs)
	return true, r, err
}

// loadScripts loads every quota script (on every master of a cluster), so the first calls
// need no EVAL. After a Redis restart redis.Script loads them again on its own.
func (g *gate) loadScripts(ctx context.Context) error {
	for _, s := range []*redis.Script{lua.QuotaDeduct, lua.QuotaGiveBack, lua.QuotaRegister, lua.QuotaClose, lua.QuotaUsage} {
		if err := s.Load(ctx, g.rdb).Err(); err != nil {
			return fmt.Errorf("load quota scripts: %w", err)
		}
	}
	return nil
}

// Give-back modes of quota_giveback.lua.
const (
	modeUndo     = "U"
	modeRollback = "R"
)

// giveBack runs quota_giveback.lua on an identity's record and the counters it names. It
// returns the script's status and what each counter got back.
func (g *gate) giveBack(ctx context.Context, base, mode, attempt, idemKey string, rs []recorded) (int64, []int64, error) {
	keys := make([]string, 1, 1+2*len(rs))
	keys[0] = recordKey(base, idemKey)
	args := make([]any, 5, 5+2*len(rs))
	args[0], args[1], args[2], args[3], args[4] = mode, attempt, g.idemTTL, idemKey, len(rs)
	for i := range rs {
		keys = appendCounterKeys(keys, base, rs[i].kind, rs[i].seg, rs[i].dim)
		args = append(args, kindArg(rs[i].kind), rs[i].amount)
	}
	v, err := lua.QuotaGiveBack.Run(ctx, g.rdb, keys, args...).Slice()
	if err != nil {
		return 0, nil, err
	}
	status, _ := v[0].(int64)
	if status != 1 {
		return status, nil, nil
	}
	s, _ := v[1].(string)
	given := make([]int64, 0, len(rs))
	for s != "" {
		var tok string
		tok, s, _ = cutSpace(s)
		n, err := strconv.ParseInt(tok, 10, 64)
		if err != nil {
			return 0, nil, fmt.Errorf("quota_giveback.lua answered %v", v)
		}
		given = append(given, n)
	}
	if len(given) != len(rs) {
		return 0, nil, fmt.Errorf("quota_giveback.lua answered %v", v)
	}
	return status, given, nil
}

func cutSpace(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// undo reverses this attempt's own step on an identity.
func (g *gate) undo(ctx context.Context, st *step, idemKey, attempt string) error {
	rs := make([]recorded, len(st.counters))
	for i := range st.counters {
		c := &st.counters[i]
		rs[i] = recorded{kind: c.kind, amount: c.amount, seg: c.seg, dim: c.dimension}
	}
	_, _, err := g.giveBack(ctx, st.base, modeUndo, attempt, idemKey, rs)
	return err
}

// record reads an identity's record of an idemKey: its state ("" if none, "D", "R"), the
// attempt that took, and its counters.
func (g *gate) record(ctx context.Context, base, idemKey string) (state, attempt string, rs []recorded, err error) {
	v, err := g.rdb.HMGet(ctx, recordKey(base, idemKey), "st", "at", "c").Result()
	if err != nil {
		return "", "", nil, err
	}
	state, _ = v[0].(string)
	attempt, _ = v[1].(string)
	c, _ := v[2].(string)
	if state == "D" {
		if rs, err = parseRecord(c); err != nil {
			return "", "", nil, err
		}
	}
	return state, attempt, rs, nil
}

// close marks a request rolled back and returns the identities its deducts noted.
func (g *gate) close(ctx context.Context, reqKey string) ([]string, error) {
	return lua.QuotaClose.Run(ctx, g.rdb, []string{reqKey}, g.idemTTL).StringSlice()
}

// usage reads counters without changing what they count.
func (g *gate) usage(ctx context.Context, st *step, nowMs int64) ([]used, error) {
	keys := make([]string, 0, 2*len(st.counters))
	args := make([]any, 2, 2+2*len(st.counters))
	args[0], args[1] = nowMs, len(st.counters)
	for i := range st.counters {
		c := &st.counters[i]
		keys = appendCounterKeys(keys, st.base, c.kind, c.seg, c.dimension)
		args = append(args, kindArg(c.kind), c.span)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	s, err := lua.QuotaUsage.Run(ctx, g.rdb, keys, args...).Text()
	if err != nil {
		return nil, err
	}
	return parseUsed(s, len(st.counters))
}

// unavailable wraps an infrastructure error as ErrUnavailable, saying what was being done.
func unavailable(what string, err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
}

func msString(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
