package sale

import (
	"strconv"
	"time"

	"vouchergate/shared/wire"
)

// State says how far a request got.
type State uint8

// How far a request got.
const (
	NotSent  State = iota // the run stopped before its turn
	Failed                // sent, but no answer: connection refused or cut, timeout
	Answered              // an HTTP answer came back
)

// Outcome is one request as the generator saw it. Times are from the start of its phase's
// schedule; latency is counted from Scheduled, not from Sent, so a server that falls behind
// shows its queue (coordinated omission).
type Outcome struct {
	Scheduled time.Duration
	Sent      time.Duration
	Done      time.Duration
	State     State
	Status    int
	Discount  int64  // of a 201
	Error     string // the answer's error code; for a Failed request, what went wrong
}

// Latency is from the scheduled send to the answer.
func (o Outcome) Latency() time.Duration { return o.Done - o.Scheduled }

// Key names the kind of answer: "201", "409 OUT_OF_STOCK", "503", "failed: timeout".
func (o Outcome) Key() string {
	switch o.State {
	case NotSent:
		return "not sent"
	case Failed:
		return "failed: " + o.Error
	}
	k := strconv.Itoa(o.Status)
	if o.Error != "" {
		k += " " + o.Error
	}
	return k
}

// Step is one request after the sale: a winner's confirm or release, or the re-send of a
// granted order.
type Step struct {
	Order  int32
	Action FollowUp // for follow-ups; Keep for a re-send
	Outcome
}

// History is everything a run asked and was answered, and the voucher before and after: what
// the verdict, the summary and the report are made from.
type History struct {
	Target      string
	Code        string
	OrderPrefix string // orderId of order i: OrderPrefix + i
	Rate        float64
	Tolerate503 bool
	Settings    Settings // what the run was asked, its seed resolved and its token left out
	Started     time.Time
	// GeneratorCPU is the CPU time this process used during the sale (user and system).
	GeneratorCPU time.Duration

	Before, After wire.VoucherView

	Plan         []Planned
	Reservations []Outcome // Reservations[i] answers Plan[i]
	FollowUps    []Step    // confirms and releases of winners, after the sale
	Resends      []Step    // each granted order once more, after the follow-ups
}

// OrderID is order i's orderId.
func (h *History) OrderID(order int32) string {
	return h.OrderPrefix + strconv.Itoa(int(order))
}

// Grant is an order answered 201: by which request first, with what discount.
type Grant struct {
	Order    int32
	Customer uint64
	Request  int
	Discount int64
}

// Grants lists the orders answered 201 at least once during the sale, in the order of their
// first 201 answer's request.
func (h *History) Grants() []Grant {
	seen := map[int32]bool{}
	var g []Grant
	for i, o := range h.Reservations {
		if o.State != Answered || o.Status != 201 {
			continue
		}
		p := h.Plan[i]
		if !seen[p.Order] {
			seen[p.Order] = true
			g = append(g, Grant{Order: p.Order, Customer: p.Customer, Request: i, Discount: o.Discount})
		}
	}
	return g
}

// Settled counts the follow-ups answered 200, by action.
func (h *History) Settled() (confirmed, released int) {
	for _, f := range h.FollowUps {
		if f.State == Answered && f.Status == 200 {
			switch f.Action {
			case Confirm:
				confirmed++
			case Release:
				released++
			}
		}
	}
	return confirmed, released
}

// allowed reports whether an answer's status is one a sale may give: want, 409, and 503 when
// tolerated.
func (h *History) allowed(o Outcome, want ...int) bool {
	if o.State != Answered {
		return false
	}
	if o.Status == 503 && h.Tolerate503 {
		return true
	}
	for _, w := range want {
		if o.Status == w {
			return true
		}
	}
	return false
}
