package history

import (
	"fmt"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"

	"vouchergate/shared/wire"
)

// orderIDsAcrossVouchers rejects an orderId granted on two vouchers (D3: an orderId has at
// most one redemption, ever), which no single voucher's partition can see.
func orderIDsAcrossVouchers(ops []Op) []Failure {
	first := map[string]*Op{}
	var fs []Failure
	for i := range ops {
		op := &ops[i]
		if op.Kind != Reserve || op.Outcome != Ok {
			continue
		}
		k := orderKey(op)
		f, ok := first[k]
		switch {
		case !ok:
			first[k] = op
		case f.Voucher != op.Voucher:
			fs = append(fs, Failure{Partition: "orders", Culprit: *op, Window: []Op{*f, *op},
				Reason: fmt.Sprintf("order %s was granted on voucher %s and on voucher %s", op.Order, f.Voucher, op.Voucher)})
		}
	}
	return fs
}

// quotaParts partitions the quota operations by identity: each identity's counters and
// idemKey records are its own (one hash tag in Redis). A deduct of several identities is seen
// by each partition as its part on that identity; a rollback goes to the partitions of every
// identity a deduct of its idemKey names.
func quotaParts(ops []Op) []*part {
	type reqKey struct {
		biz int64
		key string
	}
	byID := map[string]*part{}
	var names []string
	partOf := func(id string) *part {
		p := byID[id]
		if p == nil {
			p = &part{name: "quota " + id}
			byID[id] = p
			names = append(names, id)
		}
		return p
	}
	itemsByID := func(op *Op) (map[string][]Item, []string) {
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
	countersOf := func(cs []Counter, biz int64, id string) []Counter {
		var out []Counter
		for _, c := range cs {
			if identityOf(biz, c.Type, c.Identity) == id {
				out = append(out, c)
			}
		}
		return out
	}
	identities := map[reqKey][]string{}
	inexact := map[string]bool{}
	var quotaOps []*quotaOp
	var partsOf []string

	for i := range ops {
		op := &ops[i]
		if op.Kind != Deduct {
			continue
		}
		rk := reqKey{op.Biz, op.IdemKey}
		items, ids := itemsByID(op)
		for _, id := range ids {
			q := &quotaOp{op: op, fp: fingerprint(items[id]), counters: countersOf(op.Counters, op.Biz, id)}
			q.answer = canonicalAnswer(q.counters, false)
			if op.Outcome == Ok {
				q.takes = map[string]int64{}
				for _, c := range q.counters {
					q.takes[counterKey(c)] = amountOn(items[id], c)
				}
			}
			if len(ids) > 1 && op.Outcome != Ok {
				inexact[id] = true // it may have held steps here while it tried the next identity
			}
			if !contains(identities[rk], id) {
				identities[rk] = append(identities[rk], id)
			}
			quotaOps = append(quotaOps, q)
			partsOf = append(partsOf, id)
		}
	}
	// the deducts each rollback may have raced, by request and identity
	unsettled := map[reqKey]map[string][]*Op{}
	for i, q := range quotaOps {
		if q.op.Outcome == Ok {
			continue
		}
		rk := reqKey{q.op.Biz, q.op.IdemKey}
		if unsettled[rk] == nil {
			unsettled[rk] = map[string][]*Op{}
		}
		unsettled[rk][partsOf[i]] = append(unsettled[rk][partsOf[i]], q.op)
	}

	// An idemKey counts once: an unknown outcome of a request that a grant here answered
	// counted, if at all, what that grant was answered, between its own invocation and that
	// grant's completion. It is merged into the first grant, whose invocation it moves back.
	// With no grant, it stays open to the end (and the partition is inexact). A refusal that
	// no grant or unknown outcome of its request here could make a retry's, and that does not
	// say rolled back, is legal wherever it goes and changes nothing: it is left out.
	reqID := func(q *quotaOp, id string) string {
		return fmt.Sprintf("%d\x00%s\x00%s\x00%s", q.op.Biz, q.op.IdemKey, id, q.fp)
	}
	firstOk := map[string]*quotaOp{}
	mayCount := map[string]bool{}
	for i, q := range quotaOps {
		k := reqID(q, partsOf[i])
		if f := firstOk[k]; q.op.Outcome == Ok && (f == nil || q.op.Complete < f.op.Complete) {
			firstOk[k] = q
		}
		if q.op.Outcome != Fail {
			mayCount[k] = true
		}
	}
	invokes := map[*quotaOp]int64{}
	var deducts []*quotaOp
	var deductParts []string
	for i, q := range quotaOps {
		id := partsOf[i]
		k := reqID(q, id)
		switch f := firstOk[k]; {
		case q.op.Outcome == Fail && q.op.Code != wire.CodeQuotaRolledBack && !mayCount[k]:
			continue
		case q.op.Outcome != Ok && q.op.Outcome != Fail && f != nil:
			if t, ok := invokes[f]; q.op.Invoke < f.op.Invoke && (!ok || q.op.Invoke < t) {
				invokes[f] = q.op.Invoke
			}
			continue
		case q.op.Outcome != Ok && q.op.Outcome != Fail:
			inexact[id] = true // it may have counted what no answer shows
		}
		deducts = append(deducts, q)
		deductParts = append(deductParts, id)
	}
	for q, at := range invokes {
		op := *q.op
		op.Invoke = at
		q.op = &op
	}
	quotaOps, partsOf = deducts, deductParts
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case Rollback:
			rk := reqKey{op.Biz, op.IdemKey}
			for _, id := range identities[rk] {
				ret := map[string]int64{}
				for _, c := range countersOf(op.Returned, op.Biz, id) {
					ret[c.Dimension+"|"+c.Window+"|"] += c.Used
				}
				q := &quotaOp{op: op, returned: canonicalTakes(ret)}
				for _, d := range unsettled[rk][id] {
					if d.Invoke <= op.Complete && (d.Outcome == Fail && d.Complete >= op.Invoke || d.Outcome != Fail) {
						q.transient = true
						inexact[id] = true // the deduct's steps were counted while it ran
					}
				}
				quotaOps = append(quotaOps, q)
				partsOf = append(partsOf, id)
			}
		case Usage:
			typ, ident, _ := strings.Cut(op.Identity, ":")
			id := identityOf(op.Biz, typ, ident)
			quotaOps = append(quotaOps, &quotaOp{op: op, counters: countersOf(op.Counters, op.Biz, id)})
			partsOf = append(partsOf, id)
		}
	}
	for i, q := range quotaOps {
		id := partsOf[i]
		q.exact = !inexact[id]
		p := partOf(id)
		p.ops = append(p.ops, q.op)
		p.inputs = append(p.inputs, q)
	}

	sort.Strings(names)
	parts := make([]*part, 0, len(names))
	for _, id := range names {
		p := byID[id]
		// a partition's operations by invocation, as the voucher's are
		idx := make([]int, len(p.ops))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return p.ops[idx[a]].ID < p.ops[idx[b]].ID })
		ops, inputs := make([]*Op, len(idx)), make([]any, len(idx))
		for j, i := range idx {
			ops[j], inputs[j] = p.ops[i], p.inputs[i]
		}
		p.ops, p.inputs = ops, inputs
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
			Init: func() any { return &quotaState{counters: map[string]int64{}, keys: map[string]idemRecord{}} },
			Step: func(s, in, _ any) (bool, any) {
				n, why := step(s, in)
				return why == "", n
			},
			Equal:             func(a, b any) bool { return quotaEqual(a.(*quotaState), b.(*quotaState)) },
			Hash:              func(s any) uint64 { return s.(*quotaState).hash },
			DescribeOperation: func(in, _ any) string { return describe(in.(*quotaOp).op) },
			DescribeState:     func(s any) string { return clip(s.(*quotaState).String(), 2000) },
		}
		parts = append(parts, p)
	}
	return parts
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
