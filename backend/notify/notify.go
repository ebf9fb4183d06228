// Package notify tells every edge whether a flash voucher is sold out: a plain NATS event on the
// voucher's subject and the same state in a JetStream key-value bucket, from which an edge that
// (re)starts reads the current set.
//
// Each trigger only marks the voucher; one worker then reads the voucher's state from Redis and
// publishes that. So a publication is never older than its trigger, a sold-out state carries
// the holders read at or after the sell-out, and a burst of triggers costs one publication.
//
// Several backends publish the same voucher, and one may stall between its read and its write
// while another publishes a newer state. So every state carries the voucher's version, read
// from Redis with it, and the bucket is written with compare-and-set: a state older than the
// bucket's is dropped, never written over a newer one nor published.
package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"vouchergate/shared/events"
)

// Snapshot is a voucher's state in Redis, read in one atomic step.
type Snapshot struct {
	Loaded    bool     // false: the voucher is not in Redis
	Remaining int64    // uses left; 0 or less is sold out
	Version   uint64   // the voucher's version (lua/version.lua); 0 when Redis holds none
	Paused    bool     // the gate holds the voucher paused
	Orders    []string // every order holding a use; read only when loaded and sold out or paused
}

// Reader reads a voucher's state in Redis (the gate implements it). Implementations MUST read
// remaining, version and orders in one atomic step, so that Version names exactly the state
// returned, and MUST be safe for concurrent use.
type Reader interface {
	Snapshot(ctx context.Context, code string) (Snapshot, error)
}

// Notifier implements voucher.Notifier. It is safe for concurrent use; its methods never block
// on the network.
type Notifier struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	names    events.Names
	replicas int // of the bucket, when this notifier creates or updates it
	read     Reader
	every    time.Duration
	log      *slog.Logger

	mu          sync.Mutex
	dirty       map[string]bool      // codes whose state must be published
	deleted     map[string]bool      // codes whose state must be removed from the bucket
	known       map[string]bool      // codes published before: published again after a reconnect
	lastSoldOut map[string]time.Time // when a refusal last asked for a sold-out publication
	kv          jetstream.KeyValue   // created on first use: NATS may be down at start

	wake      chan struct{}
	stop      chan struct{}
	closeOnce sync.Once
	done      chan struct{}
}

// New returns a running notifier on nc, whose bucket keeps `replicas` copies (1 on a single
// server; 3 on a three-node cluster, so that it survives a node's death). A refusal publishes a
// voucher's sold-out state at most once every `every`.
func New(nc *nats.Conn, names events.Names, replicas int, read Reader, every time.Duration, log *slog.Logger) (*Notifier, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("notify: jetstream: %w", err)
	}
	n := &Notifier{
		nc: nc, js: js, names: names, replicas: max(1, replicas), read: read, every: every, log: log,
		dirty: map[string]bool{}, deleted: map[string]bool{}, known: map[string]bool{}, lastSoldOut: map[string]time.Time{},
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

// HoldersChanged marks code: its state is published again whatever was published last.
func (n *Notifier) HoldersChanged(code string) {
	n.mu.Lock()
	n.dirty[code] = true
	n.mu.Unlock()
	n.signal()
}

// Deleted marks code's state for removal from the bucket: the voucher is gone, and every edge
// forgets what it held of it (a deleted key reads as not sold out, not paused).
func (n *Notifier) Deleted(code string) {
	n.mu.Lock()
	delete(n.dirty, code)
	delete(n.known, code)
	n.deleted[code] = true
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
		gone := make([]string, 0, len(n.deleted))
		for code := range n.deleted {
			gone = append(gone, code)
		}
		clear(n.deleted)
		n.mu.Unlock()

		failed := false
		for _, code := range gone {
			if err := n.remove(code); err != nil {
				n.log.Warn("remove a deleted voucher's state; will retry", "code", code, "err", err)
				n.mu.Lock()
				if !n.dirty[code] { // a voucher made again under the code meanwhile publishes instead
					n.deleted[code] = true
				}
				n.mu.Unlock()
				failed = true
			}
		}
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

// publish reads code's state and writes it to the bucket, then on the subject; a state older
// than the bucket's is dropped.
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
	kv, err := n.bucket(ctx)
	if err != nil {
		return err
	}
	written, turned, err := put(ctx, kv, state, payload)
	if err != nil {
		n.kv = nil // NATS may have come back without its store: create the bucket again
		return fmt.Errorf("put state of %s: %w", code, err)
	}
	if written {
		if err := n.nc.Publish(n.names.VoucherState(code), payload); err != nil {
			return fmt.Errorf("publish state of %s: %w", code, err)
		}
		// one line per turn (sold out, available again), not per state written: the same
		// state is written again when its holders change or another backend tells it too
		level := slog.LevelDebug
		if turned {
			level = slog.LevelInfo
		}
		switch {
		case state.Paused:
			n.log.Log(ctx, level, "voucher paused; edges told", "code", code, "version", state.Version)
		case state.SoldOut:
			n.log.Log(ctx, level, "voucher sold out; edges told", "code", code, "version", state.Version)
		default:
			n.log.Log(ctx, level, "voucher available; edges told", "code", code, "version", state.Version)
		}
	} else {
		n.log.Debug("voucher state older than the bucket's; dropped", "code", code, "version", state.Version)
	}
	n.mu.Lock()
	n.known[code] = true
	n.mu.Unlock()
	return nil
}

// remove deletes code's state from the bucket.
func (n *Notifier) remove(code string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	kv, err := n.bucket(ctx)
	if err != nil {
		return err
	}
	if err := kv.Delete(ctx, code); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		n.kv = nil
		return fmt.Errorf("delete state of %s: %w", code, err)
	}
	n.log.Info("voucher deleted; edges told", "code", code)
	return nil
}

// put writes s (encoded as payload) under its code unless the bucket holds a state of a higher
// version, and reports whether it did, and whether that turned the voucher sold out or
// available (no state held before counts as a turn). Each write names the revision it read
// (compare-and-set), so a state another backend wrote meanwhile is read again, never
// overwritten unseen. An unordered state (version 0) replaces only another one, or a value that
// does not decode.
func put(ctx context.Context, kv jetstream.KeyValue, s events.VoucherState, payload []byte) (written, turned bool, err error) {
	for {
		e, err := kv.Get(ctx, s.Code)
		if errors.Is(err, jetstream.ErrKeyNotFound) { // never written, or deleted
			_, err = kv.Create(ctx, s.Code, payload)
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // another backend created it first: compare with it
			}
			return err == nil, err == nil, err
		}
		if err != nil {
			return false, false, err
		}
		held, decodeErr := events.DecodeHead(e.Value())
		if decodeErr == nil && s.Version < held.Version {
			return false, false, nil
		}
		_, err = kv.Update(ctx, s.Code, payload, e.Revision())
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // written meanwhile: compare with that
		}
		return err == nil, err == nil && (decodeErr != nil || held.SoldOut != s.SoldOut || held.Paused != s.Paused), err
	}
}

func (n *Notifier) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	if n.kv != nil { // only the worker goroutine reads and writes kv
		return n.kv, nil
	}
	kv, err := n.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: n.names.StateBucket(), History: 1, Replicas: n.replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", n.names.StateBucket(), err)
	}
	n.kv = kv
	return kv, nil
}

// State reads the voucher's sold-out state now, as it is published.
func (n *Notifier) State(ctx context.Context, code string) (events.VoucherState, error) {
	return State(ctx, n.read, code)
}

// State reads a voucher's state from Redis: sold out when loaded with no use left, paused
// when the gate holds it paused, either with the holders read now, and the version read with
// them. A voucher not loaded is reported available: the backend loads it on the next request.
func State(ctx context.Context, read Reader, code string) (events.VoucherState, error) {
	state := events.VoucherState{Code: code, At: time.Now().UTC()}
	snap, err := read.Snapshot(ctx, code)
	if err != nil {
		return state, fmt.Errorf("read state of %s: %w", code, err)
	}
	state.Version = snap.Version
	if !snap.Loaded {
		return state, nil
	}
	state.SoldOut, state.Paused = snap.Remaining <= 0, snap.Paused
	if state.SoldOut || state.Paused {
		state.Holders = events.NewHolderFilter(snap.Orders)
	}
	return state, nil
}
