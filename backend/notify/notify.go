// Package notify tells every edge whether a flash voucher is sold out: a plain NATS event on the
// voucher's subject and the same state in a JetStream key-value bucket, from which an edge that
// (re)starts reads the current set.
//
// Each trigger only marks the voucher; one worker then reads the voucher's state from Redis and
// publishes that. So a publication is never older than its trigger, a sold-out state carries
// the holders read at or after the sell-out, and a burst of triggers costs one publication.
package notify

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"vouchergate/shared/events"
)

// Reader reads a voucher's state in Redis (the gate implements it).
type Reader interface {
	Remaining(ctx context.Context, code string) (int64, bool, error)
	Orders(ctx context.Context, code string) ([]string, error)
}

// Notifier implements voucher.Notifier. It is safe for concurrent use; its methods never block
// on the network.
type Notifier struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	names events.Names
	read  Reader
	every time.Duration
	log   *slog.Logger

	mu          sync.Mutex
	dirty       map[string]bool      // codes whose state must be published
	known       map[string]bool      // codes published before: published again after a reconnect
	lastSoldOut map[string]time.Time // when a refusal last asked for a sold-out publication
	kv          jetstream.KeyValue   // created on first use: NATS may be down at start

	wake      chan struct{}
	stop      chan struct{}
	closeOnce sync.Once
	done      chan struct{}
}

// New returns a running notifier on nc. A refusal publishes a voucher's sold-out state at most
// once every `every`.
func New(nc *nats.Conn, names events.Names, read Reader, every time.Duration, log *slog.Logger) (*Notifier, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("notify: jetstream: %w", err)
	}
	n := &Notifier{
		nc: nc, js: js, names: names, read: read, every: every, log: log,
		dirty: map[string]bool{}, known: map[string]bool{}, lastSoldOut: map[string]time.Time{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go n.run()
	return n, nil
}

// SoldOut marks code, unless a refusal did so less than `every` ago.
func (n *Notifier) SoldOut(code string) {
	n.mu.Lock()
	now := time.Now()
	if now.Sub(n.lastSoldOut[code]) < n.every {
		n.mu.Unlock()
		return
	}
	n.lastSoldOut[code] = now
	n.dirty[code] = true
	n.mu.Unlock()
	n.signal()
}

// BackInStock marks code, and lets the next sell-out be published at once.
func (n *Notifier) BackInStock(code string) {
	n.mu.Lock()
	delete(n.lastSoldOut, code)
	n.dirty[code] = true
	n.mu.Unlock()
	n.signal()
}

// Resync marks every voucher published so far; call it after NATS reconnects.
func (n *Notifier) Resync() {
	n.mu.Lock()
	for code := range n.known {
		n.dirty[code] = true
	}
	n.mu.Unlock()
	n.signal()
}

func (n *Notifier) signal() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Close stops the worker; what is still marked is not published. Closing again does nothing.
func (n *Notifier) Close() {
	n.closeOnce.Do(func() { close(n.stop) })
	<-n.done
}

func (n *Notifier) run() {
	defer close(n.done)
	for {
		select {
		case <-n.stop:
			return
		case <-n.wake:
		}
		n.mu.Lock()
		codes := make([]string, 0, len(n.dirty))
		for code := range n.dirty {
			codes = append(codes, code)
		}
		clear(n.dirty)
		n.mu.Unlock()

		failed := false
		for _, code := range codes {
			if err := n.publish(code); err != nil {
				n.log.Warn("publish voucher state; will retry", "code", code, "err", err)
				n.mu.Lock()
				n.dirty[code] = true
				n.mu.Unlock()
				failed = true
			}
		}
		if failed { // NATS or Redis is away: try again shortly, without spinning
			select {
			case <-n.stop:
				return
			case <-time.After(500 * time.Millisecond):
				n.signal()
			}
		}
	}
}

func (n *Notifier) publish(code string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	state, err := State(ctx, n.read, code)
	if err != nil {
		return err
	}
	payload, err := state.Encode()
	if err != nil {
		return fmt.Errorf("encode state of %s: %w", code, err)
	}
	if err := n.nc.Publish(n.names.VoucherState(code), payload); err != nil {
		return fmt.Errorf("publish state of %s: %w", code, err)
	}
	kv, err := n.bucket(ctx)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, code, payload); err != nil {
		n.kv = nil // NATS may have come back without its store: create the bucket again
		return fmt.Errorf("put state of %s: %w", code, err)
	}
	n.mu.Lock()
	n.known[code] = true
	n.mu.Unlock()
	return nil
}

func (n *Notifier) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	if n.kv != nil { // only the worker goroutine reads and writes kv
		return n.kv, nil
	}
	kv, err := n.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.names.StateBucket(), History: 1})
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", n.names.StateBucket(), err)
	}
	n.kv = kv
	return kv, nil
}

// State reads a voucher's sold-out state from Redis: sold out when loaded with no use left,
// with the holders read now. A voucher not loaded is reported available: the backend loads it
// on the next request.
func State(ctx context.Context, read Reader, code string) (events.VoucherState, error) {
	state := events.VoucherState{Code: code, At: time.Now().UTC()}
	remaining, loaded, err := read.Remaining(ctx, code)
	if err != nil {
		return state, fmt.Errorf("read state of %s: %w", code, err)
	}
	if !loaded || remaining > 0 {
		return state, nil
	}
	orders, err := read.Orders(ctx, code)
	if err != nil {
		return state, fmt.Errorf("read holders of %s: %w", code, err)
	}
	state.SoldOut = true
	state.Holders = events.NewHolderFilter(orders)
	return state, nil
}
