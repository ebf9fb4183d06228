package quota

import "time"

// Clock tells the time every window is computed from. Implementations MUST be safe for
// concurrent use. The Redis scripts take "now" from it and never read the server's clock, so
// tests freeze and advance time instead of sleeping.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
