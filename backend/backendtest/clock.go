package backendtest

import (
	"sync"
	"time"
)

// Clock is the wall clock plus an offset that tests advance, so holds expire and grace
// periods pass without sleeping. Safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now returns the wall clock plus the offset.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}
