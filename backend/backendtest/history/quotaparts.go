package history

import (
	"fmt"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"

	"vouchergate/shared/wire"
)

// quotaParts partitions the quota operations by identity: each identity's counters and
// idemKey records are its own (one hash tag in Redis). A deduct of several identities is seen
// by each partition as its part on that identity; a rollback goes to the partitions of every
// identity a deduct of its idemKey names, a partial rollback to those its items name; a usage
// read to its identity's.
func quotaParts(ops []Op) []*part {
	sp := &quotaSplit{identities: map[reqKey][]string{}, inexact: map[string]bool{}, holding: map[string][]*quotaOp{}}
	sp.project(ops)
	unsettled := sp.unsettled()
	sp.merge()
	sp.rollbacksAndReads(ops, unsettled)
	return sp.parts()
}

type reqKey struct {
	biz int64
	key string
}

type quotaSplit struct {
	ops        []*quotaOp
	identities map[reqKey][]string // the identities a request's deducts name
	inexact    map[string]bool     // identities whose answered values are checked between bounds
	// holding: by identity, the refused deducts of several identities, each of which may have
	// held its step there while it ran
	holding map[string][]*quotaOp
}

// project gives each deduct's part on each identity it names.
func (sp *quotaSplit) project(ops []Op) {
	for i := range ops {
		op := &ops[i]
		if op.Kind != Deduct {
			continue
		}
		rk := reqKey{op.Biz, op.IdemKey}
		items, ids := itemsByIdentity(op)
		for _, id := range ids {
			q := &quotaOp{op: op, id: id, items: items[id], fp: fingerprint(items[id]), counters: countersOf(op.Counters, op.Biz, id)}
			q.answer = canonicalAnswer(q.counters)
			if op.Outcome == Ok {
				q.takes = map[string]int64{}
				for _, c := range q.counters {
					q.takes[counterKey(c)] = amountOn(items[id], c)
				}
			}
			if len(ids) > 1 && op.Outcome != Ok {
				sp.inexact[id] = true // it may have held steps here while it tried the next identity
			}
			if len(ids) > 1 && op.Outcome == Fail {
				sp.holding[id] = append(sp.holding[id], q)
			}
			if !contains(sp.identities[rk], id) {
				sp.identities[rk] = append(sp.identities[rk], id)
			}
			sp.ops = append(sp.ops, q)
		}
	}
}

// unsettled returns the deducts that did not end granted, by request and identity: those a
// rollback may have raced.
func (sp *quotaSplit) unsettled() map[reqKey]map[string][]*Op {
	m := map[reqKey]map[string][]*Op{}
	for _, q := range sp.ops {
		if q.op.Outcome == Ok {
			continue
		}
		rk := reqKey{q.op.Biz, q.op.IdemKey}
		if m[rk] == nil {
			m[rk] = map[string][]*Op{}
		}
		m[rk][q.id] = append(m[rk][q.id], q.op)
	}
	return m
}

// merge folds unknown outcomes into the grants of their requests, and leaves out the refusals
// that cannot be wrong.
//
// An idemKey counts once: an unknown outcome of a request that a grant here answered counted,
// if at all, what that grant was answered, between its own invocation and that grant's
// completion. It is merged into the first grant, whose invocation it moves back. With no
// grant, it stays open to the end (and the partition is inexact). A refusal that no grant or
// unknown outcome of its request here could make a retry's, and that does not say rolled back,
// is legal wherever it goes and changes nothing: it is left out.
func (sp *quotaSplit) merge() {
	reqID := func(q *quotaOp) string {
		return fmt.Sprintf("%d\x00%s\x00%s\x00%s", q.op.Biz, q.op.IdemKey, q.id, q.fp)
	}
	firstOk := map[string]*quotaOp{}
	mayCount := map[string]bool{}
	for _, q := range sp.ops {
		k := reqID(q)
		if f := firstOk[k]; q.op.Outcome == Ok && (f == nil || q.op.Complete < f.op.Complete) {
			firstOk[k] = q
		}
		if q.op.Outcome != Fail {
			mayCount[k] = true
		}
	}
	invokes := map[*quotaOp]int64{}
	var kept []*quotaOp
	for _, q := range sp.ops {
		k := reqID(q)
		switch f := firstOk[k]; {
		case q.op.Outcome == Fail && q.op.Code != wire.CodeQuotaRolledBack && !mayCount[k]:
			continue
		case !definitive(q.op) && f != nil:
			if t, ok := invokes[f]; q.op.Invoke < f.op.Invoke && (!ok || q.op.Invoke < t) {
				invokes[f] = q.op.Invoke
			}
			continue
		case !definitive(q.op):
			sp.inexact[q.id] = true // it may have counted what no answer shows
		}
		kept = append(kept, q)
	}
	for q, at := range invokes {
		op := *q.op
		op.Invoke = at
		q.op = &op
	}
	sp.ops = kept
}

// rollbacksAndReads adds each rollback to the identities its request names, each partial
// rollback to the identities its items name, and each usage read to its identity.
func (sp *quotaSplit) rollbacksAndReads(ops []Op, unsettled map[reqKey]map[string][]*Op) {
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case Rollback, PartialRollback:
			rk := reqKey{op.Biz, op.IdemKey}
			ids, items := sp.identities[rk], map[string][]Item(nil)
			if op.Kind == PartialRollback {
				items, ids = itemsByIdentity(op)
			}
			for _, id := range ids {
				ret := map[string]int64{}
				for _, c := range countersOf(op.Returned, op.Biz, id) {
					ret[c.Dimension+"|"+c.Window+"|"] += c.Used
				}
				q := &quotaOp{op: op, id: id, items: items[id], fp: fingerprint(items[id]), returned: canonicalTakes(ret)}
				for _, d := range unsettled[rk][id] {
					if d.Invoke <= op.Complete && (d.Outcome != Fail || d.Complete >= op.Invoke) {
						q.transient = true
						sp.inexact[id] = true // the deduct's steps were counted while it ran
					}
				}
				sp.ops = append(sp.ops, q)
			}
		case Usage:
			typ, ident, _ := strings.Cut(op.Identity, ":")
			id := identityOf(op.Biz, typ, ident)
			sp.ops = append(sp.ops, &quotaOp{op: op, id: id, counters: countersOf(op.Counters, op.Biz, id)})
		}
	}
}

// parts makes a partition of each identity's operations, by invocation.
func (sp *quotaSplit) parts() []*part {
	byID := map[string]*part{}
	var names []string
	for _, q := range sp.ops {
		q.exact = !sp.inexact[q.id]
		if !q.exact && (q.op.Kind == Deduct || q.op.Kind == Usage) {
			for _, h := range sp.holding[q.id] {
				if h.op.Invoke <= q.op.Complete && h.op.Complete >= q.op.Invoke {
					q.held = append(q.held, h.items)
				}
			}
		}
		p := byID[q.id]
		if p == nil {
			p = &part{name: "quota " + q.id}
			byID[q.id] = p
			names = append(names, q.id)
		}
		p.ops = append(p.ops, q.op)
		p.inputs = append(p.inputs, q)
	}
	sort.Strings(names)
	parts := make([]*part, 0, len(names))
	for _, id := range names {
		p := byID[id]
		sort.SliceStable(p.inputs, func(a, b int) bool { return p.inputs[a].(*quotaOp).op.ID < p.inputs[b].(*quotaOp).op.ID })
		for i, in := range p.inputs {
			p.ops[i] = in.(*quotaOp).op
		}
		quotaModel(p)
		parts = append(parts, p)
	}
	return parts
}

// quotaModel makes the quota model p's.
func quotaModel(p *part) {
	p.asInfo = func(i int) any {
		q := *p.inputs[i].(*quotaOp)
		op := *q.op
		op.Outcome = Info
		q.op = &op
		return &q
	}
	step := func(s, in any) (*quotaState, string) { return quotaStep(s.(*quotaState), in.(*quotaOp)) }
	p.explain = func(s, in any) string { _, why := step(s, in); return why }
	p.related = func(a, b *Op) bool { return a.IdemKey != "" && a.IdemKey == b.IdemKey }
	p.model = porcupine.Model{
		Init: func() any { return newQuotaState() },
		Step: func(s, in, _ any) (bool, any) {
			n, why := step(s, in)
			return why == "", n
		},
		Equal:             func(a, b any) bool { return quotaEqual(a.(*quotaState), b.(*quotaState)) },
		Hash:              func(s any) uint64 { return s.(*quotaState).hash },
		DescribeOperation: func(in, _ any) string { return describe(in.(*quotaOp).op) },
		DescribeState:     func(s any) string { return clip(s.(*quotaState).String(), 2000) },
	}
}

// itemsByIdentity groups a deduct's items by identity, identities in the order named.
func itemsByIdentity(op *Op) (map[string][]Item, []string) {
	m := map[string][]Item{}
	var ids []string
	for _, it := range op.Items {
		id := identityOf(op.Biz, it.Type, it.Identity)
		if _, ok := m[id]; !ok {
			ids = append(ids, id)
		}
		m[id] = append(m[id], it)
	}
	return m, ids
}

// countersOf returns the counters of identity id.
func countersOf(cs []Counter, biz int64, id string) []Counter {
	var out []Counter
	for _, c := range cs {
		if identityOf(biz, c.Type, c.Identity) == id {
			out = append(out, c)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
