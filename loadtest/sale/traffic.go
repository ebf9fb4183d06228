package sale

import "math/rand/v2"

// Planned is one reservation to send: Customer asks for order Order (an index into the
// run's orderIds); Original is the index of the first request of that order, its own
// index if it is the first.
type Planned struct {
	Customer uint64
	Order    int32
	Original int32
}

// Retry reports whether p resends an earlier request's order.
func (p Planned) Retry(i int) bool { return int(p.Original) != i }

// Plan draws n reservations of t's mix: a share t.RetryShare resend the order of an
// earlier request drawn uniformly (same customer, same orderId); of the others, a share
// t.SecondOrderShare are new orders of a customer who ordered before, the rest new orders of
// a customer drawn from 1..t.Customers (who may, rarely, have ordered before too, as in a
// real sale). The same seed gives the same plan.
func Plan(t Traffic, n int, seed uint64) []Planned {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	plan := make([]Planned, n)
	orders := int32(0)
	for i := range plan {
		switch {
		case i > 0 && rng.Float64() < t.RetryShare:
			first := plan[rng.IntN(i)].Original
			plan[i] = Planned{Customer: plan[first].Customer, Order: plan[first].Order, Original: first}
		case i > 0 && rng.Float64() < t.SecondOrderShare:
			plan[i] = Planned{Customer: plan[rng.IntN(i)].Customer, Order: orders, Original: int32(i)}
			orders++
		default:
			plan[i] = Planned{Customer: 1 + rng.Uint64N(uint64(t.Customers)), Order: orders, Original: int32(i)}
			orders++
		}
	}
	return plan
}

// FollowUp is what a winner does after the sale.
type FollowUp uint8

// What winners do after the sale.
const (
	Keep    FollowUp = iota // neither: the hold stays reserved
	Confirm                 // POST .../confirm
	Release                 // DELETE the reservation
)

func (f FollowUp) String() string {
	return [...]string{"keep", "confirm", "release"}[f]
}

// Decide draws what each of n winners does: a share t.ConfirmShare confirm, t.ReleaseShare
// release, the rest keep their hold.
func Decide(t Traffic, n int, seed uint64) []FollowUp {
	rng := rand.New(rand.NewPCG(seed^0x5bd1e995, seed))
	out := make([]FollowUp, n)
	for i := range out {
		switch u := rng.Float64(); {
		case u < t.ConfirmShare:
			out[i] = Confirm
		case u < t.ConfirmShare+t.ReleaseShare:
			out[i] = Release
		}
	}
	return out
}
