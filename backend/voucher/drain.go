package voucher

import (
	"context"
	"fmt"
	"time"
)

// drainPoll is how often Close looks whether the calls in flight have returned.
const drainPoll = 5 * time.Millisecond

// enter admits a call that changes both stores (a reservation, a release), unless the service
// is closing; every admitted call must leave. Counting before looking at closing, and Close
// setting closing before counting, means either the call sees closing or Close waits for it.
func (s *Service) enter() bool {
	s.inFlight.Add(1)
	if s.closing.Load() {
		s.inFlight.Add(-1)
		return false
	}
	return true
}

func (s *Service) leave() { s.inFlight.Add(-1) }

// Close refuses new reservations and releases (ErrUnavailable: the client retries elsewhere)
// and waits until those in flight have returned: every winner of the gate has its row written
// and its answer, or its use given back, or is left to the reconciler as any unknown outcome is.
// A flash writer has no work of its own besides them: each hold in its queue is a Reserve call
// waiting for its outcome. So once Close returns nil no reservation is half done, and the stores
// may close. It returns ctx's error if some are still in flight when ctx ends.
func (s *Service) Close(ctx context.Context) error {
	s.closing.Store(true)
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for {
		n := s.inFlight.Load()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("close voucher service: %d reservations or releases still in flight: %w", n, ctx.Err())
		case <-tick.C:
		}
	}
}

// errClosed is what a call made after Close answers.
func errClosed(what string) error {
	return fmt.Errorf("%s: service shutting down: %w", what, ErrUnavailable)
}
