package history

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"vouchergate/shared/wire"
)

// The voucher model is one voucher as a sequential object: a set of orders, each RESERVED,
// CONFIRMED, RELEASED or REFUNDED for one customer with the discount it was granted; a released
// or refunded order holds no use. A reservation of a
// new order is granted only while the voucher is open, its active orders are fewer than its
// total limit and the customer's fewer than the per-customer limit; an order, once reserved, is
// its customer's for good: a retry gets the same grant (the same discount), a released order is
// refused, another customer is refused. A refusal changes nothing and is legal whenever the
// order is not its customer's active one: the system may refuse while uses are held in Redis
// by attempts in flight or hanging (under-allocation, DESIGN.md section 1), which the fault
// tests' sale of the rest checks instead. A hold coming due (Expire) may be released by an
// expiry job at any instant after: the order becomes RELEASED if it is still RESERVED.

// Order states.
const (
	reserved  = 'R'
	confirmed = 'C'
	released  = 'X'
	refunded  = 'F'
)

// holds reports whether an order of status holds one of the voucher's uses.
func holds(status byte) bool { return status == reserved || status == confirmed }

// unanswered is the discount of an order an unknown outcome reserved: the first grant
// answered for it sets it.
const unanswered = -1

type order struct {
	customer string
	status   byte
	discount int64
}

type voucherState struct {
	orders map[string]order
	active map[string]int // customer -> active orders
	used   int
	closed bool
	hash   uint64
}

func (s *voucherState) clone() *voucherState {
	n := &voucherState{orders: make(map[string]order, len(s.orders)+1), active: make(map[string]int, len(s.active)+1),
		used: s.used, closed: s.closed, hash: s.hash}
	for k, v := range s.orders {
		n.orders[k] = v
	}
	for k, v := range s.active {
		n.active[k] = v
	}
	return n
}

func orderHash(key string, o order) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%c\x00%d", key, o.customer, o.status, o.discount)
	return h.Sum64()
}

// set puts o at key, keeping used, active and the hash.
func (s *voucherState) set(key string, o order) {
	if old, ok := s.orders[key]; ok {
		s.hash ^= orderHash(key, old)
		if holds(old.status) {
			s.used--
			s.active[old.customer]--
		}
	}
	s.orders[key] = o
	s.hash ^= orderHash(key, o)
	if holds(o.status) {
		s.used++
		s.active[o.customer]++
	}
}

func voucherEqual(a, b *voucherState) bool {
	if a.hash != b.hash || a.used != b.used || a.closed != b.closed || len(a.orders) != len(b.orders) {
		return false
	}
	for k, v := range a.orders {
		if b.orders[k] != v {
			return false
		}
	}
	return true
}

// orderKey is the order an operation names: a shopper's is in the customer's own scope.
func orderKey(op *Op) string {
	if op.Shopper {
		return op.Customer + "/" + op.Order
	}
	return op.Order
}

func (v Voucher) room(s *voucherState, customer string) bool {
	return !s.closed && (v.TotalLimit <= 0 || s.used < v.TotalLimit) &&
		(v.PerUserLimit <= 0 || s.active[customer] < v.PerUserLimit)
}

// step applies op to s: the next state, or why the model cannot take op with its answer.
func (v Voucher) step(s *voucherState, op *Op) (*voucherState, string) {
	key := orderKey(op)
	o, exists := s.orders[key]
	switch op.Kind {
	case Close:
		n := s.clone()
		n.closed = true
		n.hash ^= 0x9e3779b97f4a7c15
		return n, ""
	case Reserve:
		return v.reserve(s, op, key, o, exists)
	case Confirm:
		return confirm(s, op, key, o, exists)
	case Release:
		return release(s, op, key, o, exists)
	case Refund:
		return refund(s, op, key, o, exists)
	case Expire:
		return expire(s, op, key, o, exists)
	}
	if op.Outcome == Ok || op.Outcome == Fail {
		return nil, fmt.Sprintf("%s is no voucher operation", op.Kind)
	}
	return s, ""
}

// reserve: a grant of a new order within the limits, the same grant again for its customer,
// a refusal of anything but the customer's own active order.
func (v Voucher) reserve(s *voucherState, op *Op, key string, o order, exists bool) (*voucherState, string) {
	switch {
	case op.Outcome == Ok && op.Holder != "" && op.Holder != op.Customer:
		return nil, fmt.Sprintf("granted to %s, answered as %s's", op.Customer, op.Holder)
	case op.Outcome == Ok && exists && o.customer != op.Customer:
		return nil, fmt.Sprintf("order %s is %s's; granted to %s as well", op.Order, o.customer, op.Customer)
	case op.Outcome == Ok && exists && !holds(o.status):
		return nil, fmt.Sprintf("order %s was %s; a retry must be refused, it was granted", op.Order, map[byte]string{released: "released", refunded: "refunded"}[o.status])
	case op.Outcome == Ok && exists && o.discount != unanswered && o.discount != op.Discount:
		return nil, fmt.Sprintf("order %s was granted with discount %d; its retry got %d", op.Order, o.discount, op.Discount)
	case op.Outcome == Ok && exists:
		if o.discount == unanswered {
			n := s.clone()
			o.discount = op.Discount
			n.set(key, o)
			return n, ""
		}
		return s, ""
	case op.Outcome == Fail && exists && o.customer == op.Customer && holds(o.status):
		return nil, fmt.Sprintf("order %s is %s's (%c, discount %d); its retry was refused %s",
			op.Order, o.customer, o.status, o.discount, op.Code)
	case op.Outcome == Fail || exists:
		return s, ""
	case op.Outcome == Ok && s.closed:
		return nil, fmt.Sprintf("new order %s granted after the voucher closed", op.Order)
	case op.Outcome == Ok && v.TotalLimit > 0 && s.used >= v.TotalLimit:
		return nil, fmt.Sprintf("new order %s granted with all %d uses taken", op.Order, v.TotalLimit)
	case op.Outcome == Ok && !v.room(s, op.Customer):
		return nil, fmt.Sprintf("new order %s granted to %s, who holds %d of %d already",
			op.Order, op.Customer, s.active[op.Customer], v.PerUserLimit)
	case op.Outcome == Ok && v.Discount > 0 && op.Discount != v.Discount:
		return nil, fmt.Sprintf("order %s granted with discount %d; the voucher gives %d", op.Order, op.Discount, v.Discount)
	case op.Outcome == Ok:
		n := s.clone()
		n.set(key, order{customer: op.Customer, status: reserved, discount: op.Discount})
		return n, ""
	case !v.room(s, op.Customer):
		return s, "" // an unknown outcome that cannot have been granted here
	}
	d := int64(unanswered)
	if v.Discount > 0 {
		d = v.Discount
	}
	n := s.clone()
	n.set(key, order{customer: op.Customer, status: reserved, discount: d})
	return n, ""

}

// confirm: RESERVED becomes CONFIRMED; a released or refunded order is refused.
func confirm(s *voucherState, op *Op, key string, o order, exists bool) (*voucherState, string) {
	switch {
	case op.Outcome == Ok && (!exists || !holds(o.status)):
		return nil, fmt.Sprintf("order %s confirmed, but it is %s", op.Order, describeOrder(o, exists))
	case op.Outcome == Fail && op.Code == wire.CodeReservationReleased && (!exists || o.status != released):
		return nil, fmt.Sprintf("confirm of %s refused as released, but it is %s", op.Order, describeOrder(o, exists))
	case op.Outcome == Fail && op.Code == wire.CodeReservationNotFound && exists:
		return nil, fmt.Sprintf("confirm of %s refused as not found, but it is %s", op.Order, describeOrder(o, exists))
	case op.Outcome == Fail, !exists, o.status != reserved:
		return s, ""
	}
	return withStatus(s, key, o, confirmed), ""
}

// release: RESERVED becomes RELEASED, giving its use back; a confirmed order is refused.
func release(s *voucherState, op *Op, key string, o order, exists bool) (*voucherState, string) {
	switch {
	case op.Outcome == Ok && (!exists || o.status == confirmed):
		return nil, fmt.Sprintf("order %s released, but it is %s", op.Order, describeOrder(o, exists))
	case op.Outcome == Ok && o.status == refunded:
		return nil, fmt.Sprintf("order %s released, but it is %s", op.Order, describeOrder(o, exists))
	case op.Outcome == Fail && op.Code == wire.CodeReservationConfirmed && (!exists || o.status != confirmed):
		return nil, fmt.Sprintf("release of %s refused as confirmed, but it is %s", op.Order, describeOrder(o, exists))
	case op.Outcome == Fail && op.Code == wire.CodeReservationNotFound && exists:
		return nil, fmt.Sprintf("release of %s refused as not found, but it is %s", op.Order, describeOrder(o, exists))
	case op.Outcome == Fail, !exists, o.status != reserved:
		return s, ""
	}
	return withStatus(s, key, o, released), ""
}

// refund: CONFIRMED becomes REFUNDED, giving its use back (again: the same); a reserved order is
// refused (release it instead), a released one too.
func refund(s *voucherState, op *Op, key string, o order, exists bool) (*voucherState, string) {
	switch {
	case op.Outcome == Ok && (!exists || (o.status != confirmed && o.status != refunded)):
		return nil, fmt.Sprintf("order %s refunded, but it is %s", op.Order, describeOrder(o, exists))
	case op.Outcome == Fail && op.Code == wire.CodeNotConfirmed && (!exists || o.status != reserved):
		return nil, fmt.Sprintf("refund of %s refused as not confirmed, but it is %s", op.Order, describeOrder(o, exists))
	case op.Outcome == Fail && op.Code == wire.CodeReservationReleased && (!exists || o.status != released):
		return nil, fmt.Sprintf("refund of %s refused as released, but it is %s", op.Order, describeOrder(o, exists))
	case op.Outcome == Fail && op.Code == wire.CodeReservationNotFound && exists:
		return nil, fmt.Sprintf("refund of %s refused as not found, but it is %s", op.Order, describeOrder(o, exists))
	case op.Outcome == Fail, !exists, o.status != confirmed:
		return s, ""
	}
	return withStatus(s, key, o, refunded), ""
}

// expire: an expiry job releases a RESERVED order whose hold is due; any other it leaves.
func expire(s *voucherState, op *Op, key string, o order, exists bool) (*voucherState, string) {
	switch {
	case op.Outcome == Ok && (!exists || o.status != reserved):
		return nil, fmt.Sprintf("order %s expired, but it is %s", op.Order, describeOrder(o, exists))
	case op.Outcome == Fail, !exists, o.status != reserved:
		return s, ""
	}
	return withStatus(s, key, o, released), ""
}

// withStatus is s with the order at key, o, in status.
func withStatus(s *voucherState, key string, o order, status byte) *voucherState {
	n := s.clone()
	o.status = status
	n.set(key, o)
	return n
}

func describeOrder(o order, exists bool) string {
	if !exists {
		return "not reserved"
	}
	return map[byte]string{reserved: "RESERVED", confirmed: "CONFIRMED", released: "RELEASED", refunded: "REFUNDED"}[o.status] + " for " + o.customer
}

func (s *voucherState) String() string {
	keys := make([]string, 0, len(s.orders))
	for k := range s.orders {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%d active", s.used)
	if s.closed {
		b.WriteString(", closed")
	}
	b.WriteString(":")
	for _, k := range keys {
		o := s.orders[k]
		fmt.Fprintf(&b, " %s=%s/%c", k, o.customer, o.status)
	}
	return b.String()
}
