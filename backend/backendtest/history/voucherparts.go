package history

import (
	"fmt"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"

	"vouchergate/shared/wire"
)

// voucherParts partitions the voucher operations, voucher by voucher, into the groups of
// customers and orders that meet (a customer's orders, and every customer who named one of
// them), each checked by porcupine against the voucher model without its total limit. The
// total limit and the voucher's close are what a voucher's orders share: they are checked
// apart, by limitFailures, which needs no search. Partitioning by order and customer keeps a
// rejected history's check as fast as an accepted one's: a voucher's whole history, a sale of
// hundreds of concurrent clients, is quick to accept and can take the search hours to reject.
func voucherParts(ops []Op, vouchers map[string]Voucher) ([]*part, []Failure) {
	byCode := map[string][]*Op{}
	var codes []string
	for i := range ops {
		switch ops[i].Kind {
		case Reserve, Confirm, Release, Refund, Close, Expire:
		default:
			continue
		}
		if _, ok := byCode[ops[i].Voucher]; !ok {
			codes = append(codes, ops[i].Voucher)
		}
		byCode[ops[i].Voucher] = append(byCode[ops[i].Voucher], &ops[i])
	}
	sort.Strings(codes)
	var parts []*part
	var fails []Failure
	for _, code := range codes {
		spec := vouchers[code]
		fails = append(fails, limitFailures(code, spec, byCode[code])...)
		parts = append(parts, orderParts(code, spec, byCode[code])...)
	}
	return parts, fails
}

// exists reports whether op's answer proves its order has a redemption.
func exists(op *Op) bool {
	switch {
	case op.Outcome == Ok:
		return op.Kind == Reserve || op.Kind == Confirm || op.Kind == Release || op.Kind == Refund
	case op.Outcome == Fail:
		return op.Code == wire.CodeReservationReleased || op.Code == wire.CodeReservationConfirmed ||
			op.Code == wire.CodeReservationRefunded || op.Code == wire.CodeNotConfirmed
	}
	return false
}

func definitive(op *Op) bool { return op.Outcome == Ok || op.Outcome == Fail }

// proofs returns, for each order, when an answer first proved it has a redemption.
func proofs(list []*Op) map[string]int64 {
	at := map[string]int64{}
	for _, op := range list {
		if !exists(op) {
			continue
		}
		k := orderKey(op)
		if t, ok := at[k]; !ok || op.Complete < t {
			at[k] = op.Complete
		}
	}
	return at
}

// orderParts prunes what cannot change a verdict and groups the rest by the customers and
// orders that meet.
//
// An unknown reservation matters only to the operations that need its order to exist. With a
// grant of the order to its customer answered, it is merged into the first such grant (an
// order has one redemption: the grant was answered from this attempt's, or this attempt made
// none); with another answer that proves the order exists, it took effect by then or never,
// which bounds it; with none, it can take effect last, or never, alike: it is left out. A
// refusal of an order that can never be its customer's is legal wherever it goes and changes
// nothing, so it is left out too: what is left of a sale's flood of refusals is its retries of
// orders granted.
func orderParts(code string, spec Voucher, list []*Op) []*part {
	ops, bounds := prune(list)
	alone := spec
	alone.TotalLimit = 0 // limitFailures checks it
	var parts []*part
	for _, group := range meeting(ops) {
		p := &part{name: fmt.Sprintf("voucher %s %s", code, groupName(group))}
		for _, op := range group {
			p.ops = append(p.ops, op)
			p.inputs = append(p.inputs, op)
			p.bounds = append(p.bounds, bounds[op])
		}
		alone.model(p, 0)
		parts = append(parts, p)
	}
	return parts
}

// prune returns the operations of list that can change a verdict, with the bounds of the
// unknown outcomes kept.
func prune(list []*Op) ([]*Op, map[*Op]int64) {
	proven := proofs(list)
	mine := func(op *Op) string { return orderKey(op) + "\x00" + op.Customer }
	firstGrant := map[string]*Op{} // order and customer: the grant answered first
	for _, op := range list {
		if f := firstGrant[mine(op)]; op.Kind == Reserve && op.Outcome == Ok && (f == nil || op.Complete < f.Complete) {
			firstGrant[mine(op)] = op
		}
	}
	bounds := map[*Op]int64{}
	invokes := map[*Op]int64{}     // a grant's invocation moved back to an unknown outcome's merged into it
	grantable := map[string]bool{} // order and customer: a reservation that may have made the order the customer's
	var kept []*Op
	for _, op := range list {
		switch f := firstGrant[mine(op)]; {
		case op.Kind == Close:
			continue
		case op.Kind == Reserve && op.Outcome == Ok:
			grantable[mine(op)] = true
		case op.Kind == Reserve && !definitive(op) && f != nil:
			// the order has one redemption: this attempt's, if any, is the one the first grant
			// was answered from, made between this invocation and that completion
			if t, ok := invokes[f]; op.Invoke < f.Invoke && (!ok || op.Invoke < t) {
				invokes[f] = op.Invoke
			}
			continue
		case op.Kind == Reserve && !definitive(op):
			at, ok := proven[orderKey(op)]
			if !ok || at < op.Invoke {
				continue
			}
			bounds[op] = at
			grantable[mine(op)] = true
		}
		kept = append(kept, op)
	}
	var ops []*Op
	for _, op := range kept {
		if op.Kind == Reserve && op.Outcome == Fail && op.Code != wire.CodeReservationReleased && !grantable[mine(op)] {
			continue
		}
		if at, ok := invokes[op]; ok {
			moved := *op
			moved.Invoke = at
			op = &moved
		}
		ops = append(ops, op)
	}
	return ops, bounds
}

// meeting groups operations by the customers and orders that meet: union-find over customer
// ("c:") and order ("o:") names, a reservation joining its customer and its order.
func meeting(ops []*Op) [][]*Op {
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		if p, ok := parent[x]; ok && p != x {
			r := find(p)
			parent[x] = r
			return r
		}
		parent[x] = x
		return x
	}
	for _, op := range ops {
		find("o:" + orderKey(op))
		if op.Kind == Reserve {
			parent[find("c:"+op.Customer)] = find("o:" + orderKey(op))
		}
	}
	index := map[string]int{}
	var groups [][]*Op
	for _, op := range ops {
		r := find("o:" + orderKey(op))
		i, ok := index[r]
		if !ok {
			i = len(groups)
			index[r] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], op)
	}
	return groups
}

// model makes v the model of p, starting with held uses held by orders p does not show.
func (v Voucher) model(p *part, held int) {
	p.asInfo = func(i int) any {
		op := *p.ops[i]
		op.Outcome = Info
		return &op
	}
	step := func(s, in any) (*voucherState, string) { return v.step(s.(*voucherState), in.(*Op)) }
	p.explain = func(s, in any) string { _, why := step(s, in); return why }
	p.related = func(a, b *Op) bool {
		return a.Order != "" && orderKey(a) == orderKey(b) || a.Customer != "" && a.Customer == b.Customer
	}
	p.model = porcupine.Model{
		Init: func() any { return &voucherState{orders: map[string]order{}, active: map[string]int{}, used: held} },
		Step: func(s, in, _ any) (bool, any) {
			n, why := step(s, in)
			return why == "", n
		},
		Equal:             func(a, b any) bool { return voucherEqual(a.(*voucherState), b.(*voucherState)) },
		Hash:              func(s any) uint64 { return s.(*voucherState).hash },
		DescribeOperation: func(in, _ any) string { return describe(in.(*Op)) },
		DescribeState:     func(s any) string { return clip(s.(*voucherState).String(), 2000) },
	}
}

// window makes the part a limit failure is shown by: its operations, on the whole voucher's
// model, with held uses held by orders it does not show.
func (v Voucher) window(name string, ops []Op, held int) (*part, []porcupine.Operation) {
	p := &part{name: name}
	for i := range ops {
		p.ops = append(p.ops, &ops[i])
		p.inputs = append(p.inputs, &ops[i])
	}
	v.model(p, held)
	return p, p.operations(len(p.ops))
}

// groupName names a group by its customers and orders, the first few of each.
func groupName(ops []*Op) string {
	seen := map[string]bool{}
	var customers, orders []string
	for _, op := range ops {
		if op.Customer != "" && !seen["c:"+op.Customer] {
			seen["c:"+op.Customer] = true
			customers = append(customers, op.Customer)
		}
		if k := orderKey(op); !seen["o:"+k] {
			seen["o:"+k] = true
			orders = append(orders, k)
		}
	}
	few := func(list []string) string {
		if len(list) > 3 {
			return strings.Join(list[:3], ",") + fmt.Sprintf(",+%d", len(list)-3)
		}
		return strings.Join(list, ",")
	}
	return fmt.Sprintf("customer %s order %s", few(customers), few(orders))
}

// limitFailures checks what a voucher's orders share. Total limit: an order certainly holds a
// use from the first answer that proves it exists (its grant is no later) until the first
// release, refund or expiry sent for it (its end is no earlier); if more orders than
// total_limit certainly hold one at some instant, every order of the operations
// over-allocates. Close: an order
// whose every reservation that could have granted it was sent after the voucher's close had
// been answered was granted on a closed voucher.
func limitFailures(code string, spec Voucher, list []*Op) []Failure {
	t := timesOf(list)
	fails := t.closeFailures(code, spec, list)
	if f := t.totalFailure(code, spec); f != nil {
		fails = append(fails, *f)
	}
	return fails
}

// orderTimes are the instants a voucher's orders certainly held a use between.
type orderTimes struct {
	proven      map[string]int64 // order -> the first answer proving it exists
	provedBy    map[string]*Op   // that answer
	releaseSent map[string]int64 // order -> its first release, refund or expiry sent
	firstSent   map[string]int64 // order -> its first reservation that may have granted it
	orders      []string         // the proven orders, sorted
}

func timesOf(list []*Op) orderTimes {
	t := orderTimes{proven: proofs(list), provedBy: map[string]*Op{}, releaseSent: map[string]int64{}, firstSent: map[string]int64{}}
	earliest := func(m map[string]int64, k string, at int64) {
		if old, ok := m[k]; !ok || at < old {
			m[k] = at
		}
	}
	for _, op := range list {
		k := orderKey(op)
		switch {
		case op.Kind == Release, op.Kind == Refund, op.Kind == Expire: // each may end the order's hold of a use
			earliest(t.releaseSent, k, op.Invoke)
		case op.Kind == Reserve && op.Outcome != Fail:
			earliest(t.firstSent, k, op.Invoke)
		}
		if exists(op) && op.Complete == t.proven[k] && t.provedBy[k] == nil {
			t.provedBy[k] = op
		}
	}
	for k := range t.proven {
		t.orders = append(t.orders, k)
	}
	sort.Strings(t.orders)
	return t
}

// closeFailures rejects each order granted though every reservation of it was sent after the
// voucher's close was answered.
func (t orderTimes) closeFailures(code string, spec Voucher, list []*Op) []Failure {
	var closer *Op
	for _, op := range list {
		if op.Kind == Close && op.Outcome != Fail && (closer == nil || op.Complete < closer.Complete) {
			closer = op
		}
	}
	if closer == nil {
		return nil
	}
	var fails []Failure
	for _, k := range t.orders {
		if sent, ok := t.firstSent[k]; ok && sent <= closer.Complete {
			continue
		}
		f := Failure{Partition: "voucher " + code + " close", Culprit: *t.provedBy[k], Window: []Op{*closer, *t.provedBy[k]},
			Reason: fmt.Sprintf("order %s was granted, and every reservation of it was sent after the voucher closed", k)}
		f.part, f.prefix = spec.window(f.Partition, f.Window, 0)
		fails = append(fails, f)
	}
	return fails
}

// totalFailure rejects the first instant at which more orders than total_limit certainly
// hold a use, if any.
func (t orderTimes) totalFailure(code string, spec Voucher) *Failure {
	if spec.TotalLimit <= 0 {
		return nil
	}
	type event struct {
		at    int64
		delta int
		order string
	}
	var events []event
	for _, k := range t.orders {
		at := t.proven[k]
		end, released := t.releaseSent[k]
		switch {
		case !released:
			events = append(events, event{at, 1, k})
		case end > at:
			events = append(events, event{at, 1, k}, event{end, -1, k})
		}
	}
	// at an instant, releases before grants: only orders certainly holding a use at once count
	sort.SliceStable(events, func(i, j int) bool {
		if events[i].at != events[j].at {
			return events[i].at < events[j].at
		}
		return events[i].delta < events[j].delta
	})
	holding := map[string]bool{}
	for _, e := range events {
		if e.delta < 0 {
			delete(holding, e.order)
			continue
		}
		if holding[e.order] = true; len(holding) <= spec.TotalLimit {
			continue
		}
		f := &Failure{Partition: "voucher " + code + " total limit", Culprit: *t.provedBy[e.order],
			Reason: fmt.Sprintf("%d orders certainly hold a use at once; total_limit is %d", len(holding), spec.TotalLimit)}
		held := make([]string, 0, len(holding))
		for k := range holding {
			held = append(held, k)
		}
		sort.Slice(held, func(i, j int) bool { return t.proven[held[i]] > t.proven[held[j]] })
		// the latest proofs, in a window small enough for the visualization's search
		for _, k := range held[:min(len(held), 12)] {
			f.Window = append(f.Window, *t.provedBy[k])
		}
		sort.Slice(f.Window, func(i, j int) bool { return f.Window[i].Complete < f.Window[j].Complete })
		f.State = fmt.Sprintf("holding a use: %s", clip(strings.Join(held, " "), 600))
		f.part, f.prefix = spec.window(f.Partition, f.Window, len(held)-len(f.Window))
		return f
	}
	return nil
}

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
