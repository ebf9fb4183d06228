package history

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"vouchergate/shared/wire"
)

// A partial rollback (lua/quota_partial.lua) gives back part of one deduct's step on an
// identity: for each of its items there, in order, the item's amount on every counter of the
// step that the item's dimensions name and on the step's "*" counters, but no more than is left
// of the item on each counter it names (what the step took there less what was given back
// before), and on no counter more than is left there. Its rollbackKey acts once: sent again it
// answers what it gave back the first time and changes nothing; with other items (here, or on
// another identity of the idemKey, which this partition does not see) it is refused
// ROLLBACK_KEY_REUSED. On an idemKey that counts nothing here (never deducted, rolled back) it
// gives back nothing and keeps that as its answer. A whole rollback later gives back the rest.

// unknownAnswer is the answer of a rollbackKey whose first outcome is unknown and whose amount
// the model cannot tell: its first answer sets it.
const unknownAnswer = "?"

// partialStep applies a partial rollback: the next state, or why the model cannot take it.
func partialStep(s *quotaState, q *quotaOp, rec idemRecord, known bool) (*quotaState, string) {
	op := q.op
	pk := op.IdemKey + "\x00" + op.RollbackKey
	prev, acted := s.partials[pk]
	prevFP, prevAnswer, _ := strings.Cut(prev, "|")
	switch {
	// A rollbackKey is bound to all its items across the idemKey's identities, so a refusal as
	// reused where it has not acted may be for another identity's items: only one sent again
	// with the very items it acted on here is wrong.
	case op.Outcome == Fail && op.Code == wire.CodeRollbackKeyReused && acted && prevFP == q.fp:
		return nil, fmt.Sprintf("rollbackKey %s of %s refused as reused with other items; it %s", op.RollbackKey, op.IdemKey, describePartial(prev, acted))
	case op.Outcome == Fail:
		return s, ""
	case acted && prevFP != q.fp && op.Outcome == Ok:
		return nil, fmt.Sprintf("rollbackKey %s of %s gave back for other items (%s); with %s it was answered", op.RollbackKey, op.IdemKey, prevFP, q.fp)
	case acted && op.Outcome == Ok && prevAnswer == unknownAnswer:
		n := s.clone()
		n.setPartial(pk, q.fp+"|"+q.returned)
		return n, ""
	case acted && op.Outcome == Ok && prevAnswer != q.returned:
		return nil, fmt.Sprintf("rollbackKey %s of %s gave back %q; sent again it answered %q", op.RollbackKey, op.IdemKey, prevAnswer, q.returned)
	case acted:
		return s, ""
	case !known || rec.status != counted:
		if op.Outcome == Ok && q.returned != "" && !q.transient {
			return nil, fmt.Sprintf("partial rollback %s of %s, which counts nothing here (%s), gave back %s", op.RollbackKey, op.IdemKey, describeKey(rec, known), q.returned)
		}
		answer := "" // what the script keeps for it
		switch {
		case op.Outcome == Ok:
			answer = q.returned
		case q.transient:
			answer = unknownAnswer // it may have given back steps a deduct held as it ran
		}
		n := s.clone()
		n.setPartial(pk, q.fp+"|"+answer)
		return n, ""
	}
	give := rec.partial(q.items)
	answer := withoutPeriods(canonicalTakes(give))
	if op.Outcome == Ok && q.returned != answer {
		left := rec.left()
		if left == "" {
			left = "nothing"
		}
		return nil, fmt.Sprintf("partial rollback %s of %s, which has %s left here, gave back %q; its items give back %q",
			op.RollbackKey, op.IdemKey, left, q.returned, answer)
	}
	n := s.clone()
	gone := parseTakes(rec.gone)
	for k, a := range give {
		n.setCounter(k, s.counters[k]-a)
		gone[k] += a
	}
	rec.gone = canonicalTakes(gone)
	n.setKey(op.IdemKey, rec)
	n.setPartial(pk, q.fp+"|"+answer)
	return n, ""
}

// partial returns what a partial rollback of items gives back on each counter of r's step.
func (r idemRecord) partial(items []Item) map[string]int64 {
	taken, gone := parseTakes(r.taken), parseTakes(r.gone)
	counters := slices.Sorted(maps.Keys(taken))
	give := map[string]int64{}
	left := func(k string) int64 { return taken[k] - gone[k] - give[k] }
	for _, it := range items {
		var named, star []string
		for _, k := range counters {
			switch d := dimensionOf(k); {
			case d == "*":
				star = append(star, k)
			case slices.Contains(it.Dimensions, d):
				named = append(named, k)
			}
		}
		amount := it.Amount
		for _, k := range named {
			amount = min(amount, left(k))
		}
		for _, k := range append(named, star...) {
			if g := min(amount, left(k)); g > 0 {
				give[k] += g
			}
		}
	}
	return give
}

// dimensionOf is the dimension of counter k (dimension|window|period).
func dimensionOf(k string) string {
	d, _, _ := strings.Cut(k, "|")
	return d
}

func describePartial(prev string, acted bool) string {
	if !acted {
		return "never acted"
	}
	fp, answer, _ := strings.Cut(prev, "|")
	return fmt.Sprintf("acted for the same items (%s), answered %q", fp, answer)
}
