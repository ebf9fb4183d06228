package testkit

import (
	"net"
	"testing"
	"time"
)

// WaitBound is how long Eventually waits: a bound on waiting, generous for a loaded machine,
// not a measure of speed (times belong in benchmarks).
const WaitBound = 30 * time.Second

// Eventually polls cond until it holds, and fails the test naming what it waited for if it
// has not after WaitBound.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, WaitBound, what, cond)
}

// EventuallyWithin is Eventually with another bound, for a wait whose length a dependency
// sets (say why where it is used).
func EventuallyWithin(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after %v: %s", bound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ListenAgain listens on addr, the address of a server the test has just shut down, waiting
// for the port to be free again; it fails the test if it is not within WaitBound.
func ListenAgain(t testing.TB, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	Eventually(t, "listening on "+addr+" again", func() bool {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err == nil
	})
	return ln
}
