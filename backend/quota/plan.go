package quota

import (
	"strconv"
	"time"

	"vouchergate/shared/wire"
)

// Item is one thing bought by one identity: it counts Amount toward every counter that a rule
// of its identity type implies for one of its Dimensions.
type Item struct {
	IdentityType string
	Identity     string
	Dimensions   []string
	Amount       int64
}

// Counter is one counter of one identity as it stands.
type Counter struct {
	IdentityType string
	Identity     string
	Dimension    string
	Window       Window
	Used         int64
	// Limit is the limit enforced on the counter: the lowest of its ENFORCE rules', each an
	// override's for the identity when one is in force; when only SHADOW rules imply the
	// counter, the lowest of theirs, and Shadow is set (nothing refuses on it).
	Limit  int64
	Shadow bool
	// ResetsAt is when the period ends (calendar, fixed) or when the oldest purchase still
	// counting stops counting (rolling); zero when a rolling counter holds nothing.
	ResetsAt time.Time
}

// WouldExceed is a SHADOW rule that would have refused a deduct that passed: the counter as the
// deduct left it, with the shadow rule's limit, which its Used passes.
type WouldExceed struct {
	RuleID  int64
	Counter Counter
}

// Bounds that keep one identity's script call small.
const (
	// maxCountersPerIdentity bounds the counters one identity's items may imply.
	maxCountersPerIdentity = 64
	// counterGrace keeps a calendar counter a while after its period, for backends whose clock
	// lags and for rollbacks that arrive just after the period.
	counterGrace = 10 * time.Minute
)

// noLimit is the limit a script is given for a counter that only SHADOW rules imply: no amount
// reaches it (a counter holds at most 2^53 in a Lua number, far above wire.MaxQuotaLimit).
const noLimit = 1 << 53

var noLimitArg any = int64(noLimit)

// counterPlan is one counter a deduct changes, with what it adds.
type counterPlan struct {
	dimension string
	window    *Window
	kind      byte // 'C' calendar or fixed: one integer key; 'R' rolling: a sorted set and a sum
	limit     int64
	limitArg  any  // limit, boxed once per rule for the script's arguments
	enforced  bool // an ENFORCE rule implies it (else limit is noLimit)
	// the lowest SHADOW rule implying it, if hasShadow
	hasShadow   bool
	shadowLimit int64
	shadowRule  int64
	indexed     bool // a wildcard rule implies it: noted in the identity's index for usage
	amount      int64
	span        int64  // ms: how long a 'C' key lives, or an 'R' window's size
	seg         string // the window (and period) part of the key names
	resetsAt    int64  // 'C': the period's end, unix ms
	lastItem    int    // the item that last added to it, so an item adds once per counter
}

// step is one identity's part of a deduct: one script call.
type step struct {
	identityType string
	identity     string
	base         string // prefix + "quota:{biz:type:identity}:"
	counters     []counterPlan
	fp           string // fingerprint of the identity's items
}

// plan turns validated items into one step per identity, in the fixed order of identity type,
// then identity, that every deduct follows.
func plan(prefix string, bizID int64, items []Item, rules *ruleSet, now time.Time) ([]step, error) {
	var orderBuf [wire.MaxQuotaItems]int
	order := orderBuf[:len(items)]
	for i := range order {
		order[i] = i
	}
	for i := 1; i < len(order); i++ { // insertion sort: at most wire.MaxQuotaItems
		for j := i; j > 0 && identityLess(&items[order[j]], &items[order[j-1]]); j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	steps := make([]step, 0, len(items))
	nowMs := now.UnixMilli()
	for _, i := range order {
		it := &items[i]
		if n := len(steps); n == 0 || steps[n-1].identityType != it.IdentityType || steps[n-1].identity != it.Identity {
			steps = append(steps, step{identityType: it.IdentityType, identity: it.Identity,
				base: identityBase(prefix, bizID, it.IdentityType, it.Identity)})
		}
		st := &steps[len(steps)-1]
		for _, r := range rules.forType(bizID, it.IdentityType) {
			limit, limitArg := rules.limitFor(r, it.Identity, now)
			if r.Dimension == "*" {
				st.add(i, "*", r, limit, limitArg, it.Amount, now, nowMs)
				continue
			}
			for _, d := range it.Dimensions {
				if counterDim, ok := r.matches(d); ok {
					st.add(i, counterDim, r, limit, limitArg, it.Amount, now, nowMs)
				}
			}
		}
		if len(st.counters) > maxCountersPerIdentity {
			return nil, invalid("the items of %s %q imply %d counters under the rules of bizId %d; at most %d",
				it.IdentityType, clip(it.Identity), len(st.counters), bizID, maxCountersPerIdentity)
		}
	}
	for i := range steps {
		steps[i].fp = fingerprint(items, steps[i].identityType, steps[i].identity)
	}
	return steps, nil
}

func identityLess(a, b *Item) bool {
	if a.IdentityType != b.IdentityType {
		return a.IdentityType < b.IdentityType
	}
	return a.Identity < b.Identity
}

// add counts amount of item toward the counter of dimension dim under rule r, whose limit for
// the identity is limit (boxed: limitArg).
func (st *step) add(item int, dim string, r *Rule, limit int64, limitArg any, amount int64, now time.Time, nowMs int64) {
	w := &r.Window
	var kind byte
	var span, end int64
	var seg string
	if w.Type == Rolling {
		kind, span, seg = 'R', w.Size.Milliseconds(), w.id
	} else {
		p, ok := w.periodAt(now)
		if !ok {
			return // a fixed window that is not open now
		}
		kind, end, seg = 'C', p.endMs, p.seg
		span = end - nowMs + counterGrace.Milliseconds()
	}
	var e *counterPlan
	for k := range st.counters {
		if c := &st.counters[k]; c.dimension == dim && c.seg == seg {
			e = c
			break
		}
	}
	if e == nil {
		st.counters = append(st.counters, counterPlan{dimension: dim, window: w, kind: kind, limit: noLimit, limitArg: noLimitArg,
			span: span, seg: seg, resetsAt: end, lastItem: -1})
		e = &st.counters[len(st.counters)-1]
	}
	switch {
	case r.shadow() && (!e.hasShadow || limit < e.shadowLimit):
		e.hasShadow, e.shadowLimit, e.shadowRule = true, limit, r.ID
	case !r.shadow() && (!e.enforced || limit < e.limit):
		e.enforced, e.limit, e.limitArg = true, limit, limitArg
	}
	if r.Dimension != dim && r.Dimension != "*" {
		e.indexed = true // a wildcard rule: the counter's name is known only from the item
	}
	if e.lastItem != item {
		e.amount += amount
		e.lastItem = item
	}
}

// fingerprint sums a hash of each of the identity's items, so the order of items and of
// dimensions does not matter: a retry that lists them otherwise is the same request.
func fingerprint(items []Item, typ, identity string) string {
	var sum uint64
	for i := range items {
		it := &items[i]
		if it.IdentityType != typ || it.Identity != identity {
			continue
		}
		var dims uint64
		for _, d := range it.Dimensions {
			dims += fnv1a(fnvOffset, d)
		}
		h := fnvMix(fnvMix(fnvOffset, dims), uint64(it.Amount))
		sum += h
	}
	var b [16]byte
	return string(strconv.AppendUint(b[:0], sum, 36))
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnv1a(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func fnvMix(h, v uint64) uint64 {
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= fnvPrime
		v >>= 8
	}
	return h
}
