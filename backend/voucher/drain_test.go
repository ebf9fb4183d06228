package voucher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"vouchergate/backend/voucher"
)

// Close waits for a winner whose batch is being written: it returns only once the winner has
// its row and its answer, and from its call on new reservations are refused as unavailable
// (retryable) without touching either store.
func TestCloseWaitsForTheWinnersBeingWritten(t *testing.T) {
	f := newFakeEnv(voucher.Config{})
	f.create(t, "DRAIN", 10, 1, true)
	f.warm(t, "DRAIN")
	writing, release := make(chan struct{}), make(chan struct{})
	f.store.hook = func(op string, _ []string) {
		if op == "ReserveMany" {
			close(writing)
			<-release
		}
	}
	type result struct {
		r   voucher.Redemption
		err error
	}
	answered := make(chan result, 1)
	go func() {
		r, err := f.reserve("DRAIN", "c1", "o1")
		answered <- result{r, err}
	}()
	<-writing // the only write: o2 below is refused before it

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := f.svc.Close(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a write in flight and a short deadline: %v; want the deadline's error", err)
	}
	if _, err := f.reserve("DRAIN", "c2", "o2"); !errors.Is(err, voucher.ErrUnavailable) {
		t.Fatalf("a reservation after Close: %v; want ErrUnavailable", err)
	}
	if _, held := f.gate.state("DRAIN", "o2"); held {
		t.Errorf("a reservation refused after Close took a use in the gate")
	}

	closed := make(chan error, 1)
	go func() { closed <- f.svc.Close(context.Background()) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a winner was being written", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close once the write is done: %v", err)
	}
	select {
	case res := <-answered:
		if res.err != nil || res.r.OrderID != "o1" {
			t.Fatalf("the winner written during Close: %+v %v; want its redemption", res.r, res.err)
		}
	default:
		t.Fatalf("Close returned before the winner had its answer")
	}
	f.check(t, "DRAIN", "o1")
}
