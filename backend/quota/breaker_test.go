package quota

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/testkit"
)

// The breaker is per node: a node found unreachable is skipped for the backoff, then one caller
// tries it (the others skip it for one more backoff), and an answer closes it; other nodes are
// never skipped meanwhile.
func TestBreakerPerNode(t *testing.T) {
	clock := testkit.NewManualClock(time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC))
	b := newBreaker(time.Second, clock)
	if b.anyOpen() || b.skip("a") {
		t.Fatal("a new breaker skips")
	}
	b.failed("a")
	if !b.anyOpen() || !b.skip("a") || b.skip("b") {
		t.Fatal("after a failed: a must be skipped, b not")
	}
	clock.Advance(time.Second)
	if b.skip("a") {
		t.Fatal("after the backoff the first caller must try a")
	}
	if !b.skip("a") {
		t.Fatal("while one tries a, the others must skip it")
	}
	clock.Advance(time.Second)
	if b.skip("a") {
		t.Fatal("a try that never reported leaves the next backoff's first caller to try")
	}
	b.answered("a")
	if b.anyOpen() || b.skip("a") {
		t.Fatal("an answer must close the breaker")
	}
}

// What counts as Redis not reached: connection and timeout failures and servers not serving,
// not a script's error nor a replica that did not acknowledge.
func TestUnreachable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{fmt.Errorf("deduct k: %w: %w", ErrUnavailable, io.EOF), true},
		{redis.ErrPoolTimeout, true},
		{redis.ErrClosed, true},
		{fmt.Errorf("deduct: %w", ErrNotReplicated), false},
		{fmt.Errorf("deduct k: %w: %w", ErrUnavailable, errGivingBack), false},
		{errors.New("ERR Error running script"), false},
		{nil, false},
	} {
		if got := unreachable(c.err); got != c.want {
			t.Errorf("unreachable(%v) = %v; want %v", c.err, got, c.want)
		}
	}
}
