package voucher

import "sync"

// flights are the flash reservations in flight in this process, by attempt, from before the
// gate is asked until the outcome is settled (written, refused, or the use given back): a retry
// of an order whose first attempt is one of them waits for it here instead of polling the
// database. In a sale's opening a tenth of the requests can be such retries, and each poll
// takes a pooled connection; they would grow the pool (a forked server each) just when the
// writes need it.
type flights struct{ m sync.Map } // attempt -> chan struct{}, closed when its outcome is settled

// begin records attempt as in flight; the returned func, called once its outcome is settled,
// ends it.
func (f *flights) begin(attempt string) (end func()) {
	done := make(chan struct{})
	f.m.Store(attempt, done)
	return func() {
		f.m.Delete(attempt)
		close(done)
	}
}

// of returns what is closed once attempt is settled, or nil when it is not in flight here
// (settled already, or another process's).
func (f *flights) of(attempt string) <-chan struct{} {
	if done, ok := f.m.Load(attempt); ok {
		return done.(chan struct{})
	}
	return nil
}
