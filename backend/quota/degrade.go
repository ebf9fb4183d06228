package quota

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/shared/clock"
)

// Degrading open. A business line set to whenUnavailable OPEN prefers selling past its limits
// to not selling: when Redis cannot be reached its deducts answer a pass that counts nothing
// (DeductResult.Degraded). So that such answers are quick, a node found unreachable is skipped
// by those deducts for a backoff; then one deduct tries it again (the others skip it for one
// more backoff) and its outcome closes the breaker or opens it anew. Business lines that stay
// CLOSED always try Redis, as before, and answer ErrUnavailable; their calls feed the breaker
// too.

// breaker remembers, per Redis node (its address; "" for a single Redis), that it could not be
// reached. It is safe for concurrent use.
type breaker struct {
	backoff time.Duration
	clock   clock.Clock
	open    atomic.Int32 // nodes in the map: zero on the healthy path, which then reads nothing else
	mu      sync.Mutex
	nodes   map[string]time.Time // node -> skip it before this
}

func newBreaker(backoff time.Duration, c clock.Clock) *breaker {
	return &breaker{backoff: backoff, clock: c, nodes: map[string]time.Time{}}
}

// anyOpen tells whether some node was found unreachable and has not answered since.
func (b *breaker) anyOpen() bool { return b.open.Load() > 0 }

// skip tells whether a degrading deduct should not try node now: true during its backoff. The
// first to ask after the backoff gets false, and the backoff starts again for the others, so
// one deduct per backoff tries the node (one that never reaches it leaves the next to try).
func (b *breaker) skip(node string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	until, ok := b.nodes[node]
	if !ok {
		return false
	}
	now := b.clock.Now()
	if now.Before(until) {
		return true
	}
	b.nodes[node] = now.Add(b.backoff)
	return false
}

// failed notes that node could not be reached now.
func (b *breaker) failed(node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.nodes[node]; !ok {
		b.open.Add(1)
	}
	b.nodes[node] = b.clock.Now().Add(b.backoff)
}

// answered notes that node answered. On a cluster it also closes the entry of a node the slot
// map could not name (""): an answer shows the cluster serving again, and no call is ever
// observed on "" itself, so that entry would stay open, and every call pay for looking up its
// node, until the process restarts.
func (b *breaker) answered(node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.close(node)
	if node != "" {
		b.close("")
	}
}

// close forgets node; b.mu is held.
func (b *breaker) close(node string) {
	if _, ok := b.nodes[node]; ok {
		delete(b.nodes, node)
		b.open.Add(-1)
	}
}

// unreachable tells whether err says Redis could not be reached or is not serving (a refused or
// cut connection, a timeout, a pool without a free connection, a node loading or a cluster
// down), as opposed to an answer: a script's error, a replica that did not acknowledge a write
// (Redis was reached), or an attempt told to retry.
func unreachable(err error) bool {
	if err == nil || errors.Is(err, ErrNotReplicated) || errors.Is(err, errGivingBack) || errors.Is(err, errCompleteElsewhere) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, redis.ErrClosed) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		for _, p := range []string{"LOADING", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN"} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
	}
	return false
}

// nodeOf is the address of the node serving key's slot: "" on a single Redis, and when the
// cluster's slot map cannot tell.
func (sc *scripts) nodeOf(ctx context.Context, key string) string {
	c, ok := sc.rdb.(*redis.ClusterClient)
	if !ok {
		return ""
	}
	node, err := c.MasterForKey(ctx, key)
	if err != nil {
		return ""
	}
	return node.Options().Addr
}

// observe feeds the breaker with the outcome of a call on key's node.
func (sc *scripts) observe(ctx context.Context, key string, err error) {
	if sc.breaker == nil {
		return
	}
	switch {
	case unreachable(err):
		sc.breaker.failed(sc.nodeOf(ctx, key))
	case sc.breaker.anyOpen():
		sc.breaker.answered(sc.nodeOf(ctx, key))
	}
}

// degrades tells whether a deduct or check of bizID's items answers degraded without trying
// Redis: its business line is OPEN and a node of one of its identities is in its backoff.
func (s *Service) degrades(ctx context.Context, bizID int64, items []Item) bool {
	b := s.scripts.breaker
	if !b.anyOpen() || !s.rules.current().open[bizID] {
		return false
	}
	var seen [16]string // distinct nodes: items of one node ask once
	nodes := seen[:0]
	for i := range items {
		node := s.scripts.nodeOf(ctx, identityBase(s.cfg.KeyPrefix, bizID, items[i].IdentityType, items[i].Identity))
		if slices.Contains(nodes, node) {
			continue
		}
		nodes = append(nodes, node)
		if b.skip(node) {
			return true
		}
	}
	return false
}

// degraded is the answer of bizID's deduct or check with idemKey when err, if not nil, left
// it unanswered: a degraded pass when the business line is OPEN and Redis could not be
// reached (or was skipped, err nil), else ok false.
func (s *Service) degraded(bizID int64, idemKey string, err error) (DeductResult, bool) {
	if (err != nil && !unreachable(err)) || !s.rules.current().open[bizID] {
		return DeductResult{}, false
	}
	s.metrics.degradedAnswer(bizID)
	return DeductResult{IdemKey: idemKey, Counters: []Counter{}, Degraded: true}, true
}
