// Package history records what every client of a concurrency or fault test was told and checks
// that record against sequential models of a voucher and of a quota counter set, as Jepsen does:
// the history is linearizable when some order of its operations, each placed between its
// invocation and its completion, is one the model allows, answer for answer.
//
// A test wraps its client calls: Begin when a request goes out, then Ok, Fail or Info when it
// ends. Ok carries the answer; Fail is an answer that proves nothing happened (a 409 or 422
// refusal); Info is an outcome the client cannot know (a timeout, a 503, a dropped connection),
// which may or may not have taken effect. For(t) gives a test its recorder and checks the
// history when the test ends; a rejected history fails the test with its smallest failing
// window, and the history of a failed test is kept as JSON lines (with porcupine's HTML view of
// a rejected one) under Dir.
package history

import (
	"encoding/json"
	"io"
	"sort"
	"sync"
	"time"
)

// Kind is what an operation does.
type Kind string

// Operations on a voucher, then on quotas.
const (
	Reserve Kind = "reserve" // POST /vouchers/{code}/reservations
	Confirm Kind = "confirm" // POST /vouchers/{code}/reservations/{orderId}/confirm
	Release Kind = "release" // DELETE /vouchers/{code}/reservations/{orderId}
	Refund  Kind = "refund"  // POST /vouchers/{code}/reservations/{orderId}/refund
	Close   Kind = "close"   // an operator ends the voucher's period: no new order is granted after it
	// Expire is an order's hold coming due by the clock: from its invocation on, an expiry job
	// may release the order if it is still RESERVED. It is recorded as an unknown outcome (the
	// job does not say which holds it released), invoked before any job can see the hold due.
	Expire Kind = "expire"

	Deduct          Kind = "deduct"           // POST /quotas/deduct
	Rollback        Kind = "rollback"         // POST /quotas/rollback
	PartialRollback Kind = "partial-rollback" // POST /quotas/rollback with items and a rollbackKey
	Usage           Kind = "usage"            // GET /quotas/usage: one identity's counters
)

// Outcome is what the client learnt of its operation.
type Outcome string

// Outcomes.
const (
	Ok      Outcome = "ok"   // answered, with the answer
	Fail    Outcome = "fail" // refused: the answer proves nothing happened
	Info    Outcome = "info" // unknown: it may or may not have taken effect
	pending Outcome = ""     // not ended when the history was read: taken as info
)

// Op is one operation: what was asked, when, and what came back. Times are nanoseconds since
// the recorder started.
type Op struct {
	ID   int  `json:"id"`
	Kind Kind `json:"kind"`

	// Vouchers.
	Voucher  string `json:"voucher,omitempty"`
	Customer string `json:"customer,omitempty"`
	Order    string `json:"order,omitempty"`
	// Shopper: the order is in the customer's own scope (a shopper's orderId through the edge,
	// stored as "<customerId>/<orderId>"), so another customer's orderId of the same string is
	// another order.
	Shopper bool  `json:"shopper,omitempty"`
	Amount  int64 `json:"amount,omitempty"` // a reservation's order amount

	// Quotas.
	Biz         int64  `json:"biz,omitempty"`
	IdemKey     string `json:"idemKey,omitempty"`
	Items       []Item `json:"items,omitempty"`       // a deduct's, or what a partial rollback gives back
	RollbackKey string `json:"rollbackKey,omitempty"` // a partial rollback's
	Identity    string `json:"identity,omitempty"`    // a usage read's, as "TYPE:identity"

	Invoke   int64   `json:"invoke"`
	Complete int64   `json:"complete,omitempty"` // when the client stopped waiting (an info's too)
	Outcome  Outcome `json:"outcome"`

	// The answer.
	Status   int    `json:"status,omitempty"` // the HTTP status, when asked over HTTP
	Code     string `json:"code,omitempty"`   // a refusal's error code, or why the outcome is unknown
	Discount int64  `json:"discount,omitempty"`
	// Holder is the customer an Ok reservation was answered for, when the answer says (the
	// service's does, HTTP's does not).
	Holder   string    `json:"holder,omitempty"`
	Counters []Counter `json:"counters,omitempty"` // a deduct's or usage read's counters
	Returned []Counter `json:"returned,omitempty"` // what a rollback gave back (Used is the amount)
}

// Item is one identity's part of a deduct.
type Item struct {
	Type       string   `json:"type"`
	Identity   string   `json:"identity"`
	Dimensions []string `json:"dimensions,omitempty"`
	Amount     int64    `json:"amount"`
}

// Counter is one quota counter as an answer gave it.
type Counter struct {
	Type      string `json:"type"`
	Identity  string `json:"identity"`
	Dimension string `json:"dimension"`
	Window    string `json:"window"`
	// Period names the calendar or fixed period the counter counts (its end, say); empty for a
	// rolling window, whose one counter lasts.
	Period string `json:"period,omitempty"`
	Used   int64  `json:"used"`
	Limit  int64  `json:"limit,omitempty"`
}

// Voucher is what the voucher model needs of a voucher: its limits and the discount a grant
// carries (0: not checked).
type Voucher struct {
	TotalLimit   int   `json:"totalLimit"`
	PerUserLimit int   `json:"perUserLimit"`
	Discount     int64 `json:"discount,omitempty"`
}

// Recorder collects one test's history. Safe for concurrent use.
type Recorder struct {
	start time.Time

	mu       sync.Mutex
	ops      []Op
	pending  map[int]Op
	next     int
	vouchers map[string]Voucher
}

// NewRecorder returns an empty recorder whose clock starts now.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now(), pending: map[int]Op{}, vouchers: map[string]Voucher{}}
}

func (r *Recorder) now() int64 { return int64(time.Since(r.start)) }

// Voucher tells the model a voucher's limits. A voucher it was not told of is checked for
// orderId idempotency and answers to retries only.
func (r *Recorder) Voucher(code string, v Voucher) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vouchers[code] = v
}

// Call is an operation under way. It belongs to the goroutine that began it.
type Call struct {
	r  *Recorder
	Op Op // fill in the answer, then end the call
}

// Begin records op's invocation now.
func (r *Recorder) Begin(op Op) *Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.ID, op.Invoke, op.Outcome = r.next, r.now(), pending
	r.next++
	r.pending[op.ID] = op
	return &Call{r: r, Op: op}
}

// Ok ends the call with its answer, filled in c.Op.
func (c *Call) Ok() { c.end(Ok, "") }

// Fail ends the call refused with code: nothing happened.
func (c *Call) Fail(code string) { c.end(Fail, code) }

// Info ends the call without knowing its outcome; why says what the client saw.
func (c *Call) Info(why string) { c.end(Info, why) }

func (c *Call) end(o Outcome, code string) {
	c.Op.Complete, c.Op.Outcome = c.r.now(), o
	if code != "" {
		c.Op.Code = code
	}
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	delete(c.r.pending, c.Op.ID)
	c.r.ops = append(c.r.ops, c.Op)
}

// Ops returns the history so far, by invocation: calls not ended yet are included as pending
// (checked as info).
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := append([]Op(nil), r.ops...)
	for _, op := range r.pending {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].ID < ops[j].ID })
	return ops
}

// Vouchers returns the vouchers the recorder was told of.
func (r *Recorder) Vouchers() map[string]Voucher {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]Voucher, len(r.vouchers))
	for k, v := range r.vouchers {
		m[k] = v
	}
	return m
}

// Check checks the history so far.
func (r *Recorder) Check() Result { return Check(r.Ops(), r.Vouchers()) }

// WriteJSONLines writes ops one JSON object a line: the vouchers first ({"voucher":...}), then
// the operations by invocation.
func WriteJSONLines(w io.Writer, ops []Op, vouchers map[string]Voucher) error {
	enc := json.NewEncoder(w)
	codes := make([]string, 0, len(vouchers))
	for c := range vouchers {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, c := range codes {
		if err := enc.Encode(struct {
			Code string `json:"voucher"`
			Voucher
		}{c, vouchers[c]}); err != nil {
			return err
		}
	}
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return err
		}
	}
	return nil
}
