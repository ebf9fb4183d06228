package quota_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest/history"
	"vouchergate/backend/quota"
	"vouchergate/lua"
)

// errInjected is the failure a test hook puts in place of a reply.
var errInjected = errors.New("injected: the reply was lost")

// cmdHook passes every command of a client through process, and every pipeline through pipe
// (when set), so a test can hold, fail or follow up a given script call at a certain point.
type cmdHook struct {
	process func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error
	pipe    func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error
}

func (h cmdHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h cmdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	if h.process == nil {
		return next
	}
	return func(ctx context.Context, cmd redis.Cmder) error { return h.process(ctx, cmd, next) }
}

func (h cmdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	if h.pipe == nil {
		return next
	}
	return func(ctx context.Context, cmds []redis.Cmder) error { return h.pipe(ctx, cmds, next) }
}

// hookedClient returns a client of its own to the Redis (or cluster) behind rdb, with h on it.
func hookedClient(t testing.TB, rdb redis.UniversalClient, h cmdHook) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	switch r := rdb.(type) {
	case *redis.ClusterClient:
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: r.Options().Addrs, PoolSize: 16})
	case *redis.Client:
		o := *r.Options()
		c = redis.NewClient(&o)
	default:
		t.Fatalf("hookedClient: %T", rdb)
	}
	c.AddHook(h)
	t.Cleanup(func() { c.Close() })
	return c
}

// backend starts another service on e's keys (another backend) whose Redis client runs h.
func (e *env) backend(t *testing.T, h cmdHook) *quota.Service {
	t.Helper()
	cfg := e.cfg
	cfg.Redis = hookedClient(t, e.rdb, h)
	return e.start(t, cfg)
}

// scriptCall is an EVALSHA as a hook sees it.
type scriptCall struct {
	sha  string
	keys []string
	argv []string
}

func asScriptCall(cmd redis.Cmder) (scriptCall, bool) {
	a := cmd.Args()
	if len(a) < 3 || !strings.EqualFold(fmt.Sprint(a[0]), "evalsha") {
		return scriptCall{}, false
	}
	n, err := strconv.Atoi(fmt.Sprint(a[2]))
	if err != nil || 3+n > len(a) {
		return scriptCall{}, false
	}
	c := scriptCall{sha: fmt.Sprint(a[1])}
	for _, k := range a[3 : 3+n] {
		c.keys = append(c.keys, fmt.Sprint(k))
	}
	for _, v := range a[3+n:] {
		c.argv = append(c.argv, fmt.Sprint(v))
	}
	return c, true
}

// isStep tells whether cmd runs quota_deduct.lua for the identity "TYPE:identity" of bizId 1.
func isStep(cmd redis.Cmder, identity string) bool {
	c, ok := asScriptCall(cmd)
	return ok && c.sha == lua.QuotaDeduct.Hash() && strings.Contains(c.keys[0], "{1:"+identity+"}")
}

// isRegister tells whether cmd runs quota_register.lua.
func isRegister(cmd redis.Cmder) bool {
	c, ok := asScriptCall(cmd)
	return ok && c.sha == lua.QuotaRegister.Hash()
}

// isUndo tells whether cmd runs quota_giveback.lua to undo a deduct step (not a rollback).
func isUndo(cmd redis.Cmder) bool {
	c, ok := asScriptCall(cmd)
	return ok && c.sha == lua.QuotaGiveBack.Hash() && len(c.argv) > 0 && c.argv[0] == "U"
}

// checkGranted checks the invariants after a scenario. granted holds the idemKeys answered 200
// and their items, each one "ITEM:1" of amount 1 per identity under a day rule of the given
// limit: every counter equals what granted took and is within its limit. Then each granted
// idemKey is rolled back twice: the first gives back exactly its items, the second nothing, and
// every counter ends at 0. The reads and rollbacks go into the test's history.
func checkGranted(t *testing.T, e *env, day quota.Window, limit int64, ids []string, granted map[string][]quota.Item) {
	t.Helper()
	want := map[string]int64{}
	for _, items := range granted {
		for _, it := range items {
			want[it.IdentityType+":"+it.Identity] += it.Amount
		}
	}
	counters := func(when string, want map[string]int64) {
		t.Helper()
		for _, id := range ids {
			typ, name, _ := strings.Cut(id, ":")
			if _, err := usageIn(history.For(t), e.svc, 1, typ, name, []string{"ITEM:1"}); err != nil {
				t.Fatalf("%s: usage of %s: %v", when, id, err)
			}
			got := e.used(t, 1, typ, name, "ITEM:1", day)
			if got != want[id] {
				t.Fatalf("%s: %s counter %d; the deducts answered 200 took %d", when, id, got, want[id])
			}
			if got > limit {
				t.Fatalf("%s: %s counter %d over its limit %d", when, id, got, limit)
			}
		}
	}
	counters("after the scenario", want)
	for key, items := range granted {
		r, err := rollbackIn(history.For(t), e.svc, 1, key)
		if err != nil {
			t.Fatalf("rollback %s: %v", key, err)
		}
		back := map[string]int64{}
		for _, g := range r.Returned {
			back[g.IdentityType+":"+g.Identity] += g.Amount
		}
		for _, it := range items {
			id := it.IdentityType + ":" + it.Identity
			if back[id] != it.Amount {
				t.Fatalf("rollback %s gave back %+v; want %d from %s", key, r.Returned, it.Amount, id)
			}
			delete(back, id)
		}
		if len(back) != 0 {
			t.Fatalf("rollback %s gave back %+v; more than its items", key, r.Returned)
		}
		if r, err := rollbackIn(history.For(t), e.svc, 1, key); err != nil || len(r.Returned) != 0 {
			t.Fatalf("second rollback of %s: %+v %v; want nothing given back", key, r, err)
		}
	}
	counters("after every rollback", nil)
}
