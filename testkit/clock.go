package testkit

import (
	"sync"
	"time"
)

// ManualClock is a clock that moves only when told, for tests that freeze and advance time
// instead of sleeping. Safe for concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock stopped at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now returns the time the clock is stopped at.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set stops the clock at t.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// OffsetClock is the wall clock plus an offset that tests advance, so holds expire and grace
// periods pass without sleeping. Safe for concurrent use.
type OffsetClock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now returns the wall clock plus the offset.
func (c *OffsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward by d.
func (c *OffsetClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}
