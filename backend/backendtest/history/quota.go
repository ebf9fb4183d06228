package history

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"vouchergate/shared/wire"
)

// The quota model is one identity's counter set as a sequential object: each counter (a
// dimension in a window's period) holds what the deducts counted on it, and each idemKey is
// new, counted (with the items it counted and the answer it got) or rolled back. A deduct of a
// new idemKey is granted only if every counter it names stays within its limit, and is answered
// each counter's new value; a deduct of a counted idemKey with the same items gets the first
// answer and counts nothing; one with other items, or of a rolled-back idemKey, is refused. A
// rollback gives back exactly what its deduct counted, once. A usage read answers each counter's
// value. A partial rollback gives back part of a deduct (quotapartial.go), and a whole rollback
// after it the rest. Refusals for lack of room are legal at any time (a request of several
// identities holds its steps on the first while it tries the next, and gives them back if
// refused): while such a request may hold steps in a partition, or an unknown outcome counted
// what no answer shows, the partition is inexact and an answered value is checked between
// bounds: at least what the model counted, at most that plus what the unknown outcomes placed
// before it may have counted and what refused requests of several identities running at the
// same time may have held (so a deduct counted twice there is still caught once it passes
// those). A rollback racing its own deduct may give back the steps that deduct held, the deduct
// then answered rolled back: its answer is legal though the model never counted them. Entries
// leaving a rolling window are not modelled: no checked test moves its clock past one.

// idemKey states.
const (
	counted    = 'C'
	rolledBack = 'R' // rolled back before it counted anything here
	undone     = 'U' // counted, then rolled back
)

type idemRecord struct {
	status byte
	fp     string // the identity's items
	taken  string // counter=amount;...
	gone   string // counter=amount;... that partial rollbacks gave back
	answer string // counter=used/limit;... ("" while no answer is known)
}

type quotaState struct {
	counters map[string]int64
	keys     map[string]idemRecord
	// maybe: the unknown outcomes placed so far whose idemKeys no answer settled (by idemKey
	// and items), each of which may have counted its items
	maybe map[string]*quotaOp
	// partials: each rollbackKey that acted (by idemKey and rollbackKey): its items' fingerprint
	// and its answer, "|"-separated
	partials map[string]string
	hash     uint64
}

func newQuotaState() *quotaState {
	return &quotaState{counters: map[string]int64{}, keys: map[string]idemRecord{}, maybe: map[string]*quotaOp{}, partials: map[string]string{}}
}

func (s *quotaState) clone() *quotaState {
	return &quotaState{counters: maps.Clone(s.counters), keys: maps.Clone(s.keys), maybe: maps.Clone(s.maybe),
		partials: maps.Clone(s.partials), hash: s.hash}
}

func hashOf(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

func (s *quotaState) setCounter(k string, v int64) {
	if old, ok := s.counters[k]; ok {
		s.hash ^= hashOf("c", k, strconv.FormatInt(old, 10))
	}
	s.counters[k] = v
	s.hash ^= hashOf("c", k, strconv.FormatInt(v, 10))
}

func (s *quotaState) setKey(k string, r idemRecord) {
	if old, ok := s.keys[k]; ok {
		s.hash ^= hashOf("k", k, string(old.status), old.fp, old.taken, old.gone, old.answer)
	}
	s.keys[k] = r
	s.hash ^= hashOf("k", k, string(r.status), r.fp, r.taken, r.gone, r.answer)
}

// addMaybe notes an unknown outcome that may have counted q's items.
func (s *quotaState) addMaybe(q *quotaOp) {
	k := q.op.IdemKey + "\x00" + q.fp
	if _, ok := s.maybe[k]; !ok {
		s.maybe[k] = q
		s.hash ^= hashOf("m", k)
	}
}

func (s *quotaState) setPartial(k, v string) {
	if old, ok := s.partials[k]; ok {
		s.hash ^= hashOf("p", k, old)
	}
	s.partials[k] = v
	s.hash ^= hashOf("p", k, v)
}

func quotaEqual(a, b *quotaState) bool {
	if a.hash != b.hash || len(a.maybe) != len(b.maybe) {
		return false
	}
	for k := range a.maybe {
		if _, ok := b.maybe[k]; !ok {
			return false
		}
	}
	return maps.Equal(a.counters, b.counters) && maps.Equal(a.keys, b.keys) && maps.Equal(a.partials, b.partials)
}

// most is how much more than the model counted counter c may hold as q sees it: what the
// unknown outcomes placed before q may have counted, and what refused requests of several
// identities running while q ran may have held.
func (s *quotaState) most(q *quotaOp, c Counter) int64 {
	var n int64
	for _, m := range s.maybe {
		n += amountOn(m.items, c)
	}
	for _, items := range q.held {
		n += amountOn(items, c)
	}
	return n
}

func counterKey(c Counter) string { return c.Dimension + "|" + c.Window + "|" + c.Period }

// identityOf names a quota partition: one identity of one business line.
func identityOf(biz int64, typ, identity string) string {
	return strconv.FormatInt(biz, 10) + "/" + typ + ":" + identity
}

// quotaOp is an operation as one identity's partition sees it.
type quotaOp struct {
	op       *Op
	id       string           // the partition's identity
	items    []Item           // a deduct's or partial rollback's items on the identity
	fp       string           // the identity's items
	takes    map[string]int64 // counter -> amount a grant counts here
	counters []Counter        // the identity's counters in the answer
	answer   string
	returned string
	// transient: a rollback that may have given back steps a deduct of its idemKey held while
	// it ran (the deduct then refused as rolled back), which that deduct never counted
	transient bool
	exact     bool // the partition's answered values are exact
	// held: the items of each refused request of several identities that ran while this deduct
	// or read did, in an inexact partition: steps they may have held then
	held [][]Item
}

// quotaStep applies q to s: the next state, or why the model cannot take it.
func quotaStep(s *quotaState, q *quotaOp) (*quotaState, string) {
	op := q.op
	rec, known := s.keys[op.IdemKey]
	switch op.Kind {
	case Deduct:
		return deductStep(s, q, rec, known)
	case Rollback:
		return rollbackStep(s, q, rec, known)
	case PartialRollback:
		return partialStep(s, q, rec, known)
	case Usage:
		return usageStep(s, q)
	}
	if op.Outcome == Ok || op.Outcome == Fail {
		return nil, fmt.Sprintf("%s is no quota operation", op.Kind)
	}
	return s, ""
}

// deductStep: a new idemKey counts within the limits, answered the new values; a counted one
// replays its first answer; a rolled-back one is refused.
func deductStep(s *quotaState, q *quotaOp, rec idemRecord, known bool) (*quotaState, string) {
	op := q.op
	switch {
	case op.Outcome == Ok && known && rec.status != counted:
		return nil, fmt.Sprintf("idemKey %s was rolled back; a deduct with it was granted", op.IdemKey)
	case op.Outcome == Ok && known && rec.fp != q.fp:
		return nil, fmt.Sprintf("idemKey %s counted other items (%s); a deduct with %s was granted", op.IdemKey, rec.fp, q.fp)
	case op.Outcome == Ok && known && rec.answer != "" && rec.answer != q.answer:
		return nil, fmt.Sprintf("idemKey %s was answered %s; its retry got %s", op.IdemKey, rec.answer, q.answer)
	case op.Outcome == Ok && known:
		if rec.answer == "" {
			n := s.clone()
			rec.answer = q.answer
			n.setKey(op.IdemKey, rec)
			return n, ""
		}
		return s, ""
	case op.Outcome == Fail && known && rec.status == counted && rec.fp == q.fp:
		return nil, fmt.Sprintf("idemKey %s counted %s; its retry was refused %s", op.IdemKey, rec.answer, op.Code)
	case op.Outcome == Fail && op.Code == wire.CodeQuotaRolledBack && (!known || rec.status == counted):
		return nil, fmt.Sprintf("idemKey %s refused as rolled back; it was not", op.IdemKey)
	case op.Outcome == Fail || known:
		return s, ""
	case op.Outcome == Ok:
		n := s.clone()
		for _, c := range q.counters {
			k := counterKey(c)
			before, amount := s.counters[k], q.takes[k]
			switch {
			case c.Limit > 0 && before+amount > c.Limit:
				return nil, fmt.Sprintf("%s granted %d on %s, which held %d of %d", op.IdemKey, amount, k, before, c.Limit)
			case q.exact && c.Used != before+amount:
				return nil, fmt.Sprintf("%s granted %d on %s, which held %d: answered %d", op.IdemKey, amount, k, before, c.Used)
			case c.Used < before+amount:
				return nil, fmt.Sprintf("%s granted %d on %s, which held %d: answered %d, less", op.IdemKey, amount, k, before, c.Used)
			case c.Used > before+amount+s.most(q, c):
				return nil, fmt.Sprintf("%s granted %d on %s, which held %d and at most %d more no answer shows: answered %d, more",
					op.IdemKey, amount, k, before, s.most(q, c), c.Used)
			}
			n.setCounter(k, before+amount)
		}
		n.setKey(op.IdemKey, idemRecord{status: counted, fp: q.fp, taken: canonicalTakes(q.takes), answer: q.answer})
		return n, ""
	}
	// an unknown outcome no grant of its request here answered: whatever it counted, no
	// answer shows which counters (the partition is inexact), so the model counts nothing
	// and notes what it may have counted
	n := s.clone()
	n.addMaybe(q)
	return n, ""
}

// rollbackStep gives back what the idemKey counted, once, and marks it rolled back.
func rollbackStep(s *quotaState, q *quotaOp, rec idemRecord, known bool) (*quotaState, string) {
	op := q.op
	switch {
	case op.Outcome == Fail:
		return s, ""
	case op.Outcome == Ok && known && rec.status == counted && q.returned != withoutPeriods(rec.left()):
		return nil, fmt.Sprintf("rollback of %s, which counted %s here (%s given back before), gave back %q", op.IdemKey, rec.taken, rec.gone, q.returned)
	case op.Outcome == Ok && (!known || rec.status != counted) && q.returned != "" && !q.transient:
		return nil, fmt.Sprintf("rollback of %s, which counts nothing here (%s), gave back %s", op.IdemKey, describeKey(rec, known), q.returned)
	case known && rec.status != counted:
		return s, ""
	case !known:
		n := s.clone()
		n.setKey(op.IdemKey, idemRecord{status: rolledBack})
		return n, ""
	}
	n := s.clone()
	for k, a := range parseTakes(rec.left()) {
		n.setCounter(k, s.counters[k]-a)
	}
	rec.status = undone
	n.setKey(op.IdemKey, rec)
	return n, ""

}

// usageStep: a read answers each counter's value.
func usageStep(s *quotaState, q *quotaOp) (*quotaState, string) {
	op := q.op
	if op.Outcome != Ok {
		return s, ""
	}
	for _, c := range q.counters {
		k := counterKey(c)
		switch {
		case q.exact && c.Used != s.counters[k]:
			return nil, fmt.Sprintf("usage read %d on %s, which holds %d", c.Used, k, s.counters[k])
		case c.Used < s.counters[k]:
			return nil, fmt.Sprintf("usage read %d on %s, which holds %d, less", c.Used, k, s.counters[k])
		case c.Used > s.counters[k]+s.most(q, c):
			return nil, fmt.Sprintf("usage read %d on %s, which holds %d and at most %d more no answer shows", c.Used, k, s.counters[k], s.most(q, c))
		}
	}
	return s, ""
}

func describeKey(r idemRecord, known bool) string {
	if !known {
		return "unknown"
	}
	return map[byte]string{counted: "counted", rolledBack: "rolled back", undone: "rolled back"}[r.status]
}

// left is what the record's step took and no partial rollback gave back, counter=amount;...
func (r idemRecord) left() string {
	t, g := parseTakes(r.taken), parseTakes(r.gone)
	for k, a := range g {
		t[k] -= a
	}
	return canonicalTakes(t)
}

// withoutPeriods drops the periods from counter=amount;... : a rollback's answer names a
// counter by dimension and window only.
func withoutPeriods(taken string) string {
	t := map[string]int64{}
	for k, a := range parseTakes(taken) {
		t[withoutPeriod(k)] += a
	}
	return canonicalTakes(t)
}

// withoutPeriod is counter k named by dimension and window only.
func withoutPeriod(k string) string {
	if i := strings.LastIndexByte(k, '|'); i >= 0 {
		return k[:i+1]
	}
	return k
}

func parseTakes(s string) map[string]int64 {
	t := map[string]int64{}
	for _, part := range strings.Split(s, ";") {
		k, amount, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		a, _ := strconv.ParseInt(amount, 10, 64)
		t[k] += a
	}
	return t
}

// canonicalTakes writes t as counter=amount;... in order, leaving out what is zero.
func canonicalTakes(t map[string]int64) string {
	parts := make([]string, 0, len(t))
	for k, v := range t {
		if v != 0 {
			parts = append(parts, k+"="+strconv.FormatInt(v, 10))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

// canonicalAnswer writes counters as "counter=used/limit;...".
func canonicalAnswer(cs []Counter) string {
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s=%d/%d", counterKey(c), c.Used, c.Limit))
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

// fingerprint writes an identity's items as one string, dimensions in order.
func fingerprint(items []Item) string {
	parts := make([]string, 0, len(items))
	for _, it := range items {
		dims := slices.Clone(it.Dimensions)
		sort.Strings(dims)
		parts = append(parts, fmt.Sprintf("%d[%s]", it.Amount, strings.Join(dims, ",")))
	}
	sort.Strings(parts)
	return strings.Join(parts, "+")
}

// amountOn is what items count on counter c: the amounts of those naming its dimension, or of
// all of them for a rule on everything ("*") or when none names it.
func amountOn(items []Item, c Counter) int64 {
	var named, all int64
	for _, it := range items {
		all += it.Amount
		if slices.Contains(it.Dimensions, c.Dimension) {
			named += it.Amount
		}
	}
	if c.Dimension == "*" || named == 0 {
		return all
	}
	return named
}

func (s *quotaState) String() string {
	keys := make([]string, 0, len(s.counters))
	for k := range s.counters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, s.counters[k])
	}
	idem := make([]string, 0, len(s.keys))
	for k, r := range s.keys {
		idem = append(idem, k+":"+string(r.status))
	}
	sort.Strings(idem)
	fmt.Fprintf(&b, "keys %s", strings.Join(idem, " "))
	return b.String()
}
