package app

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// slotMapReloadEvery bounds how often failed calls reload the slot map: one CLUSTER SLOTS a
// tenth of a second at most, however many calls fail at once.
const slotMapReloadEvery = 100 * time.Millisecond

// slotMapReloader is a ClusterClient hook that reloads the client's slot map as soon as a
// call fails because a node is gone or the cluster says its map changed.
//
// go-redis v9 reloads the map by itself only every ClusterStateReloadInterval (60 s) or on a
// MOVED answer. A master that dies answers no MOVED: every call of its slots dials the dead
// address until the interval runs out, so the slots answer 503 for up to a minute after a
// replica has taken them over. With this hook a failed call asks for a reload (ReloadState:
// in the background, one at a time), and while the slot has no master every later failure
// asks again, so the client sees the new master within about slotMapReloadEvery of the
// cluster's own failover.
//
// A reload sends no command again: it only changes which node the next call of a slot goes
// to. Whether a failed call is sent again stays go-redis's decision (MaxRetries -1 on the
// nodes; the cluster's MOVED/ASK loop), as it was without the hook.
//
// Such a failure may be a master's death, whose replica took over without its last writes:
// each one also calls onStale (the voucher service's SuspectGate), so that flash refusals
// look at the database until the next reconciliation.
type slotMapReloader struct {
	cluster *redis.ClusterClient
	start   time.Time    // monotonic origin of last
	last    atomic.Int64 // time.Since(start) of the last reload asked for; 0: none yet
	onStale atomic.Pointer[func()]
}

func newSlotMapReloader(c *redis.ClusterClient) *slotMapReloader {
	return &slotMapReloader{cluster: c, start: time.Now()}
}

// reload asks for a reload unless one was asked for within slotMapReloadEvery.
func (r *slotMapReloader) reload(ctx context.Context) {
	if f := r.onStale.Load(); f != nil {
		(*f)()
	}
	now := int64(time.Since(r.start))
	last := r.last.Load()
	if last != 0 && now-last < int64(slotMapReloadEvery) {
		return
	}
	if r.last.CompareAndSwap(last, now) {
		r.cluster.ReloadState(ctx)
	}
}

// DialHook leaves dialing alone.
func (r *slotMapReloader) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook reloads the map after a call that failed as slotMapStale says.
func (r *slotMapReloader) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if slotMapStale(err) {
			r.reload(ctx)
		}
		return err
	}
}

// ProcessPipelineHook reloads the map if any command of the pipeline failed as slotMapStale
// says: a pipeline spans nodes, and each command carries its own error.
func (r *slotMapReloader) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err == nil {
			return nil
		}
		for _, cmd := range cmds {
			if slotMapStale(cmd.Err()) {
				r.reload(ctx)
				break
			}
		}
		return err
	}
}

// slotMapStale reports whether err says the client's slot map may be out of date: the node
// could not be reached or dropped the connection (it may be dead, its slots served by a
// promoted replica), or the cluster answered that the slot moved (MOVED), that the node is
// now a replica (READONLY) or that the slot has no master yet (CLUSTERDOWN). Answers of a
// script, redis.Nil and the caller's own deadline say nothing about the map.
func slotMapStale(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		return false
	}
	if _, moved := redis.IsMovedError(err); moved {
		return true
	}
	if redis.IsClusterDownError(err) || redis.IsReadOnlyError(err) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	// A node's dial, read or write failing (refused, reset, timed out) is an OpError, also
	// when go-redis wraps it in the dial's context error.
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return true
	}
	// context.DeadlineExceeded is a net.Error too, but here the caller gave up.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}
