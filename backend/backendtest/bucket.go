package backendtest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"vouchergate/shared/config"
	"vouchergate/shared/events"
)

// WaitBucketState waits up to 15 s for the sold-out bucket to hold code's state with soldOut as
// wanted, and returns it: the state an edge starting now would read. (The notifier writes the
// bucket, then publishes the event.)
func WaitBucketState(t testing.TB, nc *nats.Conn, names events.Names, code string, soldOut bool) events.VoucherState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if kv, err := js.KeyValue(ctx, names.StateBucket()); err == nil {
			if e, err := kv.Get(ctx, code); err == nil {
				s, err := events.DecodeVoucherState(e.Value())
				if err != nil {
					t.Fatalf("bucket %s key %s: %v", names.StateBucket(), code, err)
				}
				if s.SoldOut == soldOut {
					return s
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("bucket %s key %s: no state with soldOut=%v within 15s", names.StateBucket(), code, soldOut)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// DeleteBucketWhenDone removes cfg's sold-out bucket from the shared NATS server when the test
// ends: for a test that runs the backend some other way than Start or StartProcess.
func DeleteBucketWhenDone(t testing.TB, cfg config.Backend) {
	t.Cleanup(func() { deleteBucket(cfg) })
}
