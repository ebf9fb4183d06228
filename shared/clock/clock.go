// Package clock is how the services tell time: one interface, injected into each of them (the
// voucher service's holds, expiry and grace periods, the quota service's windows), so tests
// freeze and advance time instead of sleeping. The quota scripts take "now" from it and never
// read Redis's clock.
package clock

import "time"

// Clock tells the time. Implementations MUST be safe for concurrent use.
type Clock interface {
	Now() time.Time
}

// System is the wall clock.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }
