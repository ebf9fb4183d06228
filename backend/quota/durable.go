package quota

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated: a write's script ran, but fewer replicas than required acknowledged it in
// time. Its outcome is unknown (a failover may lose it): the caller answers 503, and the
// client's retry with the same idemKey settles it from the record, or counts it once if the
// record was lost.
var ErrNotReplicated = errors.New("not acknowledged by enough replicas")

// errTooFewReplicas: a Redis master has fewer replicas connected than writes must reach.
var errTooFewReplicas = errors.New("too few Redis replicas")

// Durability says when a quota write may be answered: at once (MinReplicas 0, Redis' own
// asynchronous replication, which a failover can lose), or once MinReplicas replicas of the
// master that ran it acknowledged it, waiting at most Wait.
type Durability struct {
	MinReplicas int
	Wait        time.Duration
}

// run runs a script that writes and, with MinReplicas set, waits for its replication: the
// script, a touch and WAIT go in one pipeline on one connection to the master of keys[0]'s
// slot, because WAIT counts only the writes of its own connection. The touch (a key of the
// script's hash tag that expires at once) makes every call write, so a call whose script
// changed nothing (a retry finding its idemKey rolled back, or replaying its record) still
// waits for all that node has written before it, the record it answers from included. Redis 7.0
// moves a connection's WAIT offset to the master's on every command, read or write; later
// releases only on a command that propagated something, and there the touch is what makes a
// read-only call wait. Its outcome feeds the breaker (degrade.go).
func (sc *scripts) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd := sc.runDurably(ctx, script, keys, args...)
	sc.observe(ctx, keys[0], cmd.Err())
	return cmd
}

// runDurably is run without the breaker.
func (sc *scripts) runDurably(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if sc.durability.MinReplicas == 0 {
		return script.Run(ctx, sc.rdb, keys, args...)
	}
	node, err := sc.masterOf(ctx, keys[0])
	if err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(fmt.Errorf("find the master of %s: %w", keys[0], err))
		return cmd
	}
	cmd, acked, err := sc.runAndWait(ctx, node, script, keys, args)
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		if lerr := script.Load(ctx, node).Err(); lerr != nil {
			cmd.SetErr(fmt.Errorf("load script: %w", lerr))
			return cmd
		}
		cmd, acked, err = sc.runAndWait(ctx, node, script, keys, args)
	}
	switch {
	case err != nil:
		cmd.SetErr(err)
		if c, ok := sc.rdb.(*redis.ClusterClient); ok {
			// The call went to the node itself, past the cluster client's own handling of a
			// dead node or a moved slot: ask it to read the slot map again (in the background).
			c.ReloadState(ctx)
		}
	case acked < int64(sc.durability.MinReplicas):
		cmd.SetErr(fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, acked, sc.durability.MinReplicas, sc.durability.Wait))
	}
	return cmd
}

// runAndWait sends the script, the touch and WAIT in one pipeline on node, and returns the
// script's reply, how many replicas acknowledged, and the first error.
func (sc *scripts) runAndWait(ctx context.Context, node *redis.Client, script *redis.Script, keys []string, args []any) (*redis.Cmd, int64, error) {
	var cmd *redis.Cmd
	var wait *redis.IntCmd
	_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
		cmd = script.EvalSha(ctx, p, keys, args...)
		p.Set(ctx, keys[0]+":w", "", time.Millisecond)
		wait = redis.NewIntCmd(ctx, "wait", sc.durability.MinReplicas, sc.durability.Wait.Milliseconds())
		_ = p.Process(ctx, wait)
		return nil
	})
	if err := cmd.Err(); err != nil {
		return cmd, 0, err
	}
	if err := wait.Err(); err != nil {
		return cmd, 0, fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	}
	return cmd, wait.Val(), nil
}

// masterOf is the client of the master that serves key: the cluster's node for its slot, or
// the single Redis itself.
func (sc *scripts) masterOf(ctx context.Context, key string) (*redis.Client, error) {
	switch c := sc.rdb.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("a %T cannot run WAIT on the master of a key", sc.rdb)
}

// CheckReplicas returns an error unless every master of rdb (the single Redis, or each
// master of a cluster) has at least n replicas connected, naming what to do instead. A Redis
// that cannot be asked is an error too: replicated is a promise the backend checks before it
// makes it.
func CheckReplicas(ctx context.Context, rdb redis.UniversalClient, n int) error {
	err := checkReplicas(ctx, rdb, n)
	if err == nil || errors.Is(err, errTooFewReplicas) {
		return err
	}
	return fmt.Errorf("VG_QUOTA_DURABILITY is replicated, but the replicas of the Redis masters could not be counted: %w; "+
		"start Redis before the backend, so that it can check that every master has VG_QUOTA_MIN_REPLICAS=%d, or set VG_QUOTA_DURABILITY=async", err, n)
}

func checkReplicas(ctx context.Context, rdb redis.UniversalClient, n int) error {
	check := func(ctx context.Context, node *redis.Client) error {
		info, err := node.Info(ctx, "replication").Result()
		if err != nil {
			return fmt.Errorf("read INFO replication of %s: %w", node.Options().Addr, err)
		}
		connected := infoField(info, "connected_slaves")
		if connected < n {
			return fmt.Errorf("%w: VG_QUOTA_DURABILITY is replicated with VG_QUOTA_MIN_REPLICAS=%d, but the Redis master %s has %d replica(s) connected; "+
				"add replicas, or set VG_QUOTA_DURABILITY=async (a failover may lose acknowledged deducts) and, on a single Redis, "+
				"run it with appendonly yes and appendfsync always so a restart keeps them "+
				"(measured at 0.43 to 0.77 of the deducts per second of a Redis without persistence: docs/BENCHMARKS.md, Purchase quotas)",
				errTooFewReplicas, n, node.Options().Addr, connected)
		}
		return nil
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, check)
	case *redis.Client:
		return check(ctx, c)
	}
	return fmt.Errorf("VG_QUOTA_DURABILITY=replicated needs a single Redis or a Redis Cluster, not a %T", rdb)
}

// infoField reads an integer field of an INFO answer (0 when absent).
func infoField(info, name string) int {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
