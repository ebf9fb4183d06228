package history

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Timeout bounds the check of one partition. A partition not decided in time is undecided:
// not rejected, but not checked either, and For fails the test for it.
var Timeout = 2 * time.Minute

// Result is what the check of a history found.
type Result struct {
	Ops, Partitions int
	Took            time.Duration
	Failures        []Failure // one for each partition the models reject
	Undecided       []string  // partitions not decided within Timeout
}

// Linearizable reports whether no partition was rejected.
func (r Result) Linearizable() bool { return len(r.Failures) == 0 }

// Decided reports whether every partition was decided within Timeout: a history with an
// undecided partition is linearizable only as far as the check went.
func (r Result) Decided() bool { return len(r.Undecided) == 0 }

// Failure is a rejected partition, told by its smallest failing window: the shortest prefix of
// the partition's history (by completion) that is already not linearizable, ending with the
// operation whose answer no order of the operations before it explains.
type Failure struct {
	Partition string
	Culprit   Op
	Reason    string // why the model refuses the culprit after the longest linearization it found
	State     string // the model's state there
	Window    []Op   // the operations around the culprit: concurrent with it, or on its order or idemKey

	part   *part
	prefix []porcupine.Operation
}

// part is one partition: a voucher's operations, or one quota identity's.
type part struct {
	name   string
	ops    []*Op
	inputs []any           // the step input of each op
	asInfo func(i int) any // the step input of op i taken as an unknown outcome
	// bounds: for an unknown outcome, a time by which it has certainly taken effect or never
	// will (0: none known, it stays open to the end)
	bounds  []int64
	model   porcupine.Model // Step over those inputs
	explain func(s, in any) string
	related func(a, b *Op) bool
}

// Check checks a history against the models, partitioned by voucher and by quota identity.
func Check(ops []Op, vouchers map[string]Voucher) Result {
	start := time.Now()
	parts, counted := voucherParts(ops, vouchers)
	parts = append(parts, quotaParts(ops)...)
	res := Result{Ops: len(ops), Partitions: len(parts)}
	res.Failures = append(res.Failures, counted...)
	res.Failures = append(res.Failures, orderIDsAcrossVouchers(ops)...)

	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			verdict := porcupine.CheckOperationsTimeout(p.model, p.operations(len(p.ops)), Timeout)
			var f *Failure
			if verdict == porcupine.Illegal {
				f = p.smallestFailure()
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case verdict == porcupine.Unknown:
				res.Undecided = append(res.Undecided, p.name)
			case f != nil:
				res.Failures = append(res.Failures, *f)
			}
		}()
	}
	wg.Wait()
	// the earliest failure first: what went wrong first explains, often, what followed
	sort.Slice(res.Failures, func(i, j int) bool {
		a, b := res.Failures[i], res.Failures[j]
		if a.Culprit.Complete != b.Culprit.Complete {
			return a.Culprit.Complete < b.Culprit.Complete
		}
		return a.Partition < b.Partition
	})
	sort.Strings(res.Undecided)
	res.Took = time.Since(start)
	return res
}

// byCompletion returns the indices of p's definitive operations by completion.
func (p *part) byCompletion() []int {
	var idx []int
	for i, op := range p.ops {
		if op.Outcome == Ok || op.Outcome == Fail {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return p.ops[idx[a]].Complete < p.ops[idx[b]].Complete })
	return idx
}

// operations returns the prefix of p's history that ends with the k-th definitive completion:
// those k operations as answered, and every other operation invoked by then as an unknown
// outcome (it had not completed), with no completion. k = len(p.ops) is the whole history.
func (p *part) operations(k int) []porcupine.Operation {
	defs := p.byCompletion()
	k = min(k, len(defs))
	done := make(map[int]bool, k)
	until := int64(math.MaxInt64)
	if k < len(defs) {
		until = p.ops[defs[k-1]].Complete
	}
	var last int64
	for _, i := range defs[:k] {
		done[i] = true
		last = max(last, p.ops[i].Complete)
	}
	var ops []porcupine.Operation
	for i, op := range p.ops {
		if op.Invoke > until {
			continue
		}
		last = max(last, op.Invoke)
		o := porcupine.Operation{Input: p.inputs[i], Call: op.Invoke, Return: op.Complete, Metadata: i}
		if !done[i] {
			o.Input, o.Return = p.asInfo(i), -1
			if b := p.bound(i); b > 0 && b <= until && b >= op.Invoke {
				o.Return = b
			}
		}
		ops = append(ops, o)
	}
	for j := range ops {
		if ops[j].Return == -1 {
			ops[j].Return = last + 1 // after everything: an unknown outcome may take effect at any time
		}
	}
	lanes(ops)
	return ops
}

func (p *part) bound(i int) int64 {
	if p.bounds == nil {
		return 0
	}
	return p.bounds[i]
}

// lanes gives each operation a client lane for the visualization: the first free at its call.
func lanes(ops []porcupine.Operation) {
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return ops[order[a]].Call < ops[order[b]].Call })
	var busy []int64 // lane -> when it is free
	for _, i := range order {
		lane := -1
		for l, until := range busy {
			if until < ops[i].Call {
				lane = l
				break
			}
		}
		if lane < 0 {
			lane = len(busy)
			busy = append(busy, 0)
		}
		busy[lane] = ops[i].Return
		ops[i].ClientId = lane
	}
}

// smallestFailure finds p's smallest failing window: the least k whose prefix is rejected
// (a prefix rejected stays rejected as the history grows).
func (p *part) smallestFailure() *Failure {
	defs := p.byCompletion()
	lo, hi := 1, len(defs)
	for lo < hi {
		mid := (lo + hi) / 2
		if porcupine.CheckOperationsTimeout(p.model, p.operations(mid), Timeout) == porcupine.Illegal {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if len(defs) == 0 {
		return &Failure{Partition: p.name, Reason: "rejected with no definitive operation"}
	}
	culprit := p.ops[defs[lo-1]]
	prefix := p.operations(lo)
	f := &Failure{Partition: p.name, Culprit: *culprit, part: p, prefix: prefix}

	// Replay the longest linearization the checker found, then ask the model about the culprit.
	_, info := porcupine.CheckOperationsVerbose(p.model, prefix, Timeout)
	var longest []porcupine.Operation
	for _, parts := range info.PartialLinearizationsOperations() {
		for _, l := range parts {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	state := p.model.Init()
	placed := map[int]bool{}
	for _, o := range longest {
		if o.Metadata.(int) == defs[lo-1] {
			break
		}
		placed[o.Metadata.(int)] = true
		_, state = p.model.Step(state, o.Input, nil)
	}
	f.State = p.model.DescribeState(state)
	f.Reason = p.explain(state, p.inputs[defs[lo-1]])
	if f.Reason == "" {
		// The culprit fits alone: tell what it leaves impossible among the answered operations
		// still open.
		f.Reason = "no order of the operations open around it fits"
		_, after := p.model.Step(state, p.inputs[defs[lo-1]], nil)
		for _, o := range prefix {
			i := o.Metadata.(int)
			if i == defs[lo-1] || placed[i] || (p.ops[i].Outcome != Ok && p.ops[i].Outcome != Fail) {
				continue
			}
			if why := p.explain(after, o.Input); why != "" {
				f.Reason = fmt.Sprintf("with it, #%d cannot be: %s", p.ops[i].ID, why)
				break
			}
		}
	}

	f.Window = p.around(prefix, culprit)
	return f
}

// around returns the operations of prefix around culprit: concurrent with it, or related to it
// (its order, customer or idemKey), the 40 nearest.
func (p *part) around(prefix []porcupine.Operation, culprit *Op) []Op {
	var w []Op
	for _, o := range prefix {
		op := p.ops[o.Metadata.(int)]
		if op.ID == culprit.ID || p.related(op, culprit) || (op.Invoke <= culprit.Complete && (!definitive(op) || op.Complete >= culprit.Invoke)) {
			w = append(w, *op)
		}
	}
	sort.Slice(w, func(i, j int) bool { return w[i].Invoke < w[j].Invoke })
	if len(w) > 40 {
		at := sort.Search(len(w), func(i int) bool { return w[i].Invoke >= culprit.Invoke })
		from := max(0, min(at-30, len(w)-40))
		w = w[from : from+40]
	}
	return w
}

// Visualize writes porcupine's HTML view of the smallest failing window.
func (f Failure) Visualize(w io.Writer) error {
	if f.part == nil {
		return fmt.Errorf("no history to show for %s", f.Partition)
	}
	_, info := porcupine.CheckOperationsVerbose(f.part.model, f.prefix, 10*time.Second) // partial if it times out
	return porcupine.Visualize(f.part.model, info, w)
}

// String tells the failure: the culprit, why, the state, the window.
func (f Failure) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n  because %s", f.Partition, describe(&f.Culprit), f.Reason)
	if f.State != "" {
		fmt.Fprintf(&b, "\n  the model's state there: %s", clip(f.State, 600))
	}
	if len(f.Window) > 0 {
		fmt.Fprintf(&b, "\n  smallest failing window (%d operations around it):", len(f.Window))
		for i := range f.Window {
			mark := " "
			if f.Window[i].ID == f.Culprit.ID {
				mark = ">"
			}
			fmt.Fprintf(&b, "\n   %s %s", mark, describe(&f.Window[i]))
		}
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("... (%d more bytes)", len(s)-n)
}

// describe writes one operation on a line: its times, what it asked, what it got.
func describe(op *Op) string {
	var b strings.Builder
	end := "…"
	if op.Outcome == Ok || op.Outcome == Fail || op.Outcome == Info {
		end = fmt.Sprintf("%.6fs", float64(op.Complete)/1e9)
	}
	fmt.Fprintf(&b, "#%d [%.6fs %s] %s", op.ID, float64(op.Invoke)/1e9, end, describeCall(op))
	outcome := string(op.Outcome)
	if outcome == "" {
		outcome = "pending"
	}
	fmt.Fprintf(&b, " -> %s", outcome)
	if op.Status != 0 {
		fmt.Fprintf(&b, " %d", op.Status)
	}
	if op.Code != "" {
		fmt.Fprintf(&b, " %s", op.Code)
	}
	if op.Kind == Reserve && op.Outcome == Ok {
		fmt.Fprintf(&b, " discount %d", op.Discount)
		if op.Holder != "" && op.Holder != op.Customer {
			fmt.Fprintf(&b, " for %s", op.Holder)
		}
	}
	if len(op.Counters) > 0 {
		fmt.Fprintf(&b, " %s", canonicalAnswer(op.Counters))
	}
	if len(op.Returned) > 0 {
		fmt.Fprintf(&b, " gave back %s", canonicalAnswer(op.Returned))
	}
	return b.String()
}

func describeItems(items []Item) string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = fmt.Sprintf("%s:%s %d %v", it.Type, it.Identity, it.Amount, it.Dimensions)
	}
	return strings.Join(out, ", ")
}

func describeCall(op *Op) string {
	switch op.Kind {
	case Reserve:
		return fmt.Sprintf("reserve %s order %s for %s", op.Voucher, op.Order, op.Customer)
	case Confirm, Release:
		return fmt.Sprintf("%s %s order %s", op.Kind, op.Voucher, op.Order)
	case Close:
		return "close " + op.Voucher
	case Expire:
		return fmt.Sprintf("expire %s order %s", op.Voucher, op.Order)
	case Deduct:
		return fmt.Sprintf("deduct biz %d key %s [%s]", op.Biz, op.IdemKey, describeItems(op.Items))
	case Rollback:
		return fmt.Sprintf("rollback biz %d key %s", op.Biz, op.IdemKey)
	case PartialRollback:
		return fmt.Sprintf("partial rollback biz %d key %s as %s [%s]", op.Biz, op.IdemKey, op.RollbackKey, describeItems(op.Items))
	case Usage:
		return fmt.Sprintf("usage biz %d %s", op.Biz, op.Identity)
	}
	return string(op.Kind)
}
