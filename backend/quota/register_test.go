package quota_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest/history"
	"vouchergate/backend/quota"
)

// On a cluster the request's registration lives on another node than the first identity's
// step. If the registration is lost, or comes after a rollback of the idemKey, and giving the
// step back fails too, the deduct must still not stay counted: a rollback gives back whatever a
// deduct counted.
func TestClusterDeductIsRegisteredBeforeItCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rdb := clusterRedis(t)
	for _, tc := range []struct {
		name           string
		rollbackFirst  bool // the client's rollback reaches the service before its deduct
		loseRegistered bool // the registration's call fails before it reaches Redis
	}{
		{name: "registration lost", loseRegistered: true},
		{name: "registration after a rollback", rollbackFirst: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
			day := calendar(t, quota.Day, "UTC")
			e.rule(t, 1, "USER", "ITEM:1", 5, day)
			rec := history.For(t)
			x := e.backend(t, cmdHook{
				process: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
					if isUndo(cmd) || (tc.loseRegistered && isRegister(cmd)) {
						cmd.SetErr(errInjected)
						return errInjected
					}
					return next(ctx, cmd)
				},
				// the registration used to share a pipeline with the first step
				pipe: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
					i := slices.IndexFunc(cmds, isRegister)
					if !tc.loseRegistered || i < 0 {
						return next(ctx, cmds)
					}
					rest := slices.Delete(slices.Clone(cmds), i, i+1)
					err := next(ctx, rest)
					cmds[i].SetErr(errInjected)
					return errors.Join(err, errInjected)
				},
			})
			if tc.rollbackFirst {
				if _, err := rollbackIn(rec, e.svc, 1, "k"); err != nil {
					t.Fatal(err)
				}
			}
			_, err := deductIn(rec, x, 1, "k", item("USER", "u", 1, "ITEM:1"))
			if !errors.Is(err, quota.ErrUnavailable) && !errors.Is(err, quota.ErrRolledBack) {
				t.Fatalf("deduct: %v; want ErrUnavailable or ErrRolledBack", err)
			}
			// the client rolls back what it was not told was taken
			if _, err := rollbackIn(rec, e.svc, 1, "k"); err != nil {
				t.Fatal(err)
			}
			if got := e.used(t, 1, "USER", "u", "ITEM:1", day); got != 0 {
				t.Fatalf("counter %d after the deduct's rollback; want 0", got)
			}
			if _, err := deductIn(rec, e.svc, 1, "k", item("USER", "u", 1, "ITEM:1")); !errors.Is(err, quota.ErrRolledBack) {
				t.Fatalf("a late retry: %v; want ErrRolledBack", err)
			}
			checkGranted(t, e, day, 5, []string{"USER:u"}, nil)
		})
	}
}
