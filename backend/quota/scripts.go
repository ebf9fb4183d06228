package quota

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"vouchergate/lua"
)

// scripts runs the quota's Lua scripts on Redis (single or Cluster), one call per identity, and
// reads the records they keep.
type scripts struct {
	rdb        redis.UniversalClient
	idemTTL    any  // ms, as the scripts take it; boxed once
	cluster    bool // keys of different hash tags live on different nodes
	durability Durability
	breaker    *breaker // told of every writing call's outcome (degrade.go)
}

// Step outcomes, as quota_deduct.lua returns them.
const (
	stepTaken      = 1
	stepReplayed   = 0
	stepFull       = -1
	stepRolledBack = -2
	stepReused     = -3
	stepSuperseded = -4 // another attempt of the idemKey is giving back; nothing taken here
)

// held tells whether the attempt that got status holds the step: it alone may undo it.
func held(status int64) bool { return status == stepTaken || status == stepReplayed }

// Outcomes of settling a request of several identities (quota_settle.lua).
const (
	settleComplete   = 1  // keep every step: the request is complete
	settleGiveBack   = 0  // the generation moved on: give back the steps held
	settleRolledBack = -2 // the idemKey was rolled back
)

// stepResult is what quota_deduct.lua answered for one identity.
type stepResult struct {
	status int64
	used   string // taken or replayed: "used:oldest" per counter
	record string // replayed: the counters of the first attempt
	full   int    // full: the index of the counter without room
	fullAt used   // full: that counter's state
	gen    int64  // first step: the request's generation when registered
	// settled: the request was settled in the same call (the last step), with outcome settle
	settled bool
	settle  int64
}

func (sc *scripts) deductCall(st *step, idemKey, attempt string, nowMs int64) ([]string, []any) {
	keys := make([]string, 2, 2+2*len(st.counters))
	keys[0], keys[1] = recordKey(st.base, idemKey), indexKey(st.base)
	args := make([]any, 7, 7+4*len(st.counters))
	args[0] = nowMs
	args[1] = sc.idemTTL
	args[2] = attempt
	args[3] = st.fp
	args[4] = idemKey
	args[5] = appendRecord(make([]byte, 0, 96*len(st.counters)), st.counters)
	args[6] = len(st.counters)
	for i := range st.counters {
		c := &st.counters[i]
		keys = appendCounterKeys(keys, st.base, c.kind, c.seg, c.dimension)
		kind := kindArg(c.kind)
		if c.indexed {
			kind = indexedKindArg(c.kind)
		}
		args = append(args, kind, c.limitArg, c.amount, c.span)
	}
	return keys, args
}

func kindArg(k byte) any {
	if k == 'C' {
		return "C"
	}
	return "R"
}

// indexedKindArg is a counter's kind when the deduct notes it in the identity's index.
func indexedKindArg(k byte) any {
	if k == 'C' {
		return "c"
	}
	return "r"
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
		usedText, _ := a[2].(string)
		oldestText, _ := a[3].(string)
		var err1, err2 error
		r.fullAt.used, err1 = strconv.ParseInt(usedText, 10, 64)
		r.fullAt.oldest, err2 = parseScore(oldestText)
		if err1 != nil || err2 != nil {
			return r, fmt.Errorf("quota_deduct.lua answered %v", v)
		}
	case r.status == stepRolledBack || r.status == stepReused || r.status == stepSuperseded:
	default:
		return r, fmt.Errorf("quota_deduct.lua answered %v", v)
	}
	return r, nil
}

// requestPart is what a step's call also does to the request's record on a single Redis, where
// every key is on one server (see quota_deduct.lua).
type requestPart struct {
	op   string // "R" register, "S" settle
	key  string
	tags []string // "R": the request's identities
	gen  int64    // "S": the generation the attempt registered under
}

// deduct runs one identity's step, and part on the request's record if part is not nil.
func (sc *scripts) deduct(ctx context.Context, st *step, idemKey, attempt string, nowMs int64, part *requestPart) (stepResult, error) {
	keys, args := sc.deductCall(st, idemKey, attempt, nowMs)
	if part != nil {
		keys = append(keys, part.key)
		args = append(args, part.op)
		if part.op == "R" {
			for _, t := range part.tags {
				args = append(args, t)
			}
		} else {
			args = append(args, part.gen)
		}
	}
	v, err := sc.run(ctx, lua.QuotaDeduct, keys, args...).Result()
	if err != nil {
		return stepResult{}, err
	}
	if part == nil {
		return parseStep(v)
	}
	a, _ := v.([]any)
	if len(a) < 2 {
		return stepResult{}, fmt.Errorf("quota_deduct.lua answered %v", v)
	}
	extra, _ := a[len(a)-1].(int64)
	r, err := parseStep(a[:len(a)-1])
	if part.op == "R" {
		r.gen = extra
	} else {
		r.settled = true
		r.settle = settleGiveBack
		if extra == 1 {
			r.settle = settleComplete
		}
		if r.status == stepRolledBack {
			r.settle = settleRolledBack
		}
	}
	return r, err
}

// begin registers the request's identities and runs the first identity's step, returning
// the request's generation. A step never counts before its request is registered, so a rollback
// always finds what a deduct took: on a single Redis both are one script call; on a cluster the
// request's record lives on another node and is registered first, at the price of a round trip.
// A request rolled back already answers stepRolledBack and takes nothing.
func (sc *scripts) begin(ctx context.Context, reqKey string, tags []string, st *step, idemKey, attempt string, nowMs int64) (int64, stepResult, error) {
	if !sc.cluster {
		r, err := sc.deduct(ctx, st, idemKey, attempt, nowMs, &requestPart{op: "R", key: reqKey, tags: tags})
		return r.gen, r, err
	}
	args := make([]any, 0, 1+len(tags))
	args = append(args, sc.idemTTL)
	for _, t := range tags {
		args = append(args, t)
	}
	gen, err := sc.run(ctx, lua.QuotaRegister, []string{reqKey}, args...).Int64()
	if err != nil {
		return 0, stepResult{}, fmt.Errorf("register: %w", err)
	}
	if gen < 0 {
		return 0, stepResult{status: stepRolledBack}, nil
	}
	r, err := sc.deduct(ctx, st, idemKey, attempt, nowMs, nil)
	return gen, r, err
}

// last runs the last identity's step of a request of several and, if it is taken or
// replayed, completes the request (quota_settle.lua): in one call on a single Redis, in two on
// a cluster. On a single Redis a refusal settles the request in the same call too.
func (sc *scripts) last(ctx context.Context, reqKey string, gen int64, st *step, idemKey, attempt string, nowMs int64) (stepResult, error) {
	if !sc.cluster {
		return sc.deduct(ctx, st, idemKey, attempt, nowMs, &requestPart{op: "S", key: reqKey, gen: gen})
	}
	r, err := sc.deduct(ctx, st, idemKey, attempt, nowMs, nil)
	if err != nil || !held(r.status) {
		return r, err
	}
	out, err := sc.settle(ctx, reqKey, "C", gen)
	if err != nil {
		return r, fmt.Errorf("complete: %w", err)
	}
	r.settled, r.settle = true, out
	return r, nil
}

// settle completes a request ("C") or bumps its generation to give back ("G"); see
// quota_settle.lua.
func (sc *scripts) settle(ctx context.Context, reqKey, op string, gen int64) (int64, error) {
	out, err := sc.run(ctx, lua.QuotaSettle, []string{reqKey}, op, gen, sc.idemTTL).Int64()
	if err == nil && out != settleComplete && out != settleGiveBack && out != settleRolledBack {
		err = fmt.Errorf("quota_settle.lua answered %d", out)
	}
	return out, err
}

// loadScripts loads every quota script (on every master of a cluster), so the first calls
// need no EVAL. After a Redis restart redis.Script loads them again on its own.
func (sc *scripts) loadScripts(ctx context.Context) error {
	for _, s := range []*redis.Script{lua.QuotaDeduct, lua.QuotaGiveBack, lua.QuotaRegister, lua.QuotaSettle, lua.QuotaClose, lua.QuotaUsage,
		lua.QuotaCheck, lua.QuotaPartial, lua.QuotaRollbackKey, lua.QuotaReset} {
		if err := s.Load(ctx, sc.rdb).Err(); err != nil {
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

// Give-back outcomes, as quota_giveback.lua returns them.
const (
	giveBackDone   = 1  // given back: the amounts follow
	giveBackNone   = 0  // rolled back or undone already, or (undo) another attempt holds the step
	giveBackReread = -1 // (rollback) the record is not what the caller read: read it again
)

// giveBack runs quota_giveback.lua on an identity's record and the counters it names. It
// returns the script's status and what each counter got back.
func (sc *scripts) giveBack(ctx context.Context, base, mode, attempt, idemKey string, rs []recorded) (int64, []int64, error) {
	keys := make([]string, 2, 2+2*len(rs))
	keys[0], keys[1] = recordKey(base, idemKey), resetsKey(base)
	args := make([]any, 5, 5+2*len(rs))
	args[0], args[1], args[2], args[3], args[4] = mode, attempt, sc.idemTTL, idemKey, len(rs)
	for i := range rs {
		keys = appendCounterKeys(keys, base, rs[i].kind, rs[i].seg, rs[i].dim)
		args = append(args, kindArg(rs[i].kind), rs[i].amount)
	}
	v, err := sc.run(ctx, lua.QuotaGiveBack, keys, args...).Slice()
	if err != nil {
		return 0, nil, err
	}
	status, _ := v[0].(int64)
	if status != giveBackDone {
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

// undo reverses a step this attempt holds on an identity: the counters it took, or those of
// the record it replayed (another attempt's, which may differ from this attempt's plan). It
// changes nothing if another attempt holds the step now.
func (sc *scripts) undo(ctx context.Context, st *step, r *stepResult, idemKey, attempt string) error {
	var rs []recorded
	if r.status == stepReplayed {
		var err error
		if rs, err = parseRecord(r.record); err != nil {
			return err
		}
	} else {
		rs = make([]recorded, len(st.counters))
		for i := range st.counters {
			c := &st.counters[i]
			rs[i] = recorded{kind: c.kind, amount: c.amount, seg: c.seg, dim: c.dimension}
		}
	}
	_, _, err := sc.giveBack(ctx, st.base, modeUndo, attempt, idemKey, rs)
	return err
}

// record reads an identity's record of an idemKey: its state ("" if none, "D", "R"), the
// attempt that took, and its counters (also once rolled back).
func (sc *scripts) record(ctx context.Context, base, idemKey string) (state, attempt string, rs []recorded, err error) {
	v, err := sc.rdb.HMGet(ctx, recordKey(base, idemKey), "st", "at", "c").Result()
	if err != nil {
		return "", "", nil, err
	}
	state, _ = v[0].(string)
	attempt, _ = v[1].(string)
	c, _ := v[2].(string)
	if c != "" { // kept once rolled back, as partial rollbacks' answers refer to it
		if rs, err = parseRecord(c); err != nil {
			return "", "", nil, err
		}
	}
	return state, attempt, rs, nil
}

// close marks a request rolled back and returns the identities its deducts noted.
func (sc *scripts) close(ctx context.Context, reqKey string) ([]string, error) {
	return sc.run(ctx, lua.QuotaClose, []string{reqKey}, sc.idemTTL).StringSlice()
}

// check runs quota_check.lua: what quota_deduct.lua would answer for the step now, in its
// shapes (stepTaken: would take, with the counters it would reach), changing nothing.
func (sc *scripts) check(ctx context.Context, st *step, idemKey string, nowMs int64) (stepResult, error) {
	keys, args := sc.deductCall(st, idemKey, "", nowMs)
	v, err := lua.QuotaCheck.Run(ctx, sc.rdb, keys, args...).Result()
	sc.observe(ctx, keys[0], err)
	if err != nil {
		return stepResult{}, err
	}
	return parseStep(v)
}

// rolledBack reads whether the request's record marks it rolled back, changing nothing.
func (sc *scripts) rolledBack(ctx context.Context, reqKey string) (bool, error) {
	return sc.rdb.HExists(ctx, reqKey, "!").Result()
}

// usage reads counters without changing what they count.
func (sc *scripts) usage(ctx context.Context, st *step, nowMs int64) ([]used, error) {
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
	s, err := lua.QuotaUsage.Run(ctx, sc.rdb, keys, args...).Text()
	if err != nil {
		return nil, err
	}
	return parseUsed(s, len(st.counters))
}
