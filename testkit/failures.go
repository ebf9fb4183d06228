package testkit

import (
	"fmt"
	"runtime"
	"testing"
)

// Failures is a test that records what a check under test reports instead of failing, so a
// test can show that its checks fail when they should. Anything else goes to the embedded TB.
type Failures struct {
	testing.TB
	Said []string
}

// Failed runs check with a Failures on t in a goroutine of its own (a Fatalf ends it, as
// testing's does) and returns what it reported.
func Failed(t testing.TB, check func(t testing.TB)) []string {
	f := &Failures{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(f)
	}()
	<-done
	return f.Said
}

func (f *Failures) Helper() {}

func (f *Failures) Errorf(format string, args ...any) {
	f.Said = append(f.Said, fmt.Sprintf(format, args...))
}

func (f *Failures) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}
