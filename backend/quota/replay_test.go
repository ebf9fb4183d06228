package quota_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/quota"
)

// Two attempts of one idemKey run at once (a client's retry while its first try still runs):
// whatever the interleaving, a deduct answered 200 stays counted until its rollback. Each
// scenario is forced with hooks on the first attempt's Redis client; the attempts run on two
// services (two backends) over the same keys. Identities are visited DEVICE, then USER.
func TestReplayIsNeverUndone(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		t.Run("reply lost", func(t *testing.T) { replyLost(t, rdb) })
	})
}

// replayEnv is a limit of 1 a day on DEVICE d and USER u, and the items of one purchase.
func replayEnv(t *testing.T, rdb redis.UniversalClient) (*env, quota.Window, []quota.Item) {
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC), rdb)
	day := calendar(t, quota.Day, "UTC")
	e.rule(t, 1, "DEVICE", "ITEM:1", 1, day)
	e.rule(t, 1, "USER", "ITEM:1", 1, day)
	return e, day, []quota.Item{item("DEVICE", "d", 1, "ITEM:1"), item("USER", "u", 1, "ITEM:1")}
}

var replayIDs = []string{"DEVICE:d", "USER:u"}

// X takes DEVICE; X's USER step runs in Redis but its reply is lost. Before X hears of it, Y
// replays both steps and answers 200. X must not give back what Y answered for.
func replyLost(t *testing.T, rdb redis.UniversalClient) {
	e, day, items := replayEnv(t, rdb)
	var yErr error
	fired := false
	x := e.backend(t, cmdHook{process: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if fired || !isStep(cmd, "USER:u") {
			return next(ctx, cmd)
		}
		fired = true
		if err := next(ctx, cmd); err != nil {
			t.Errorf("X's USER step: %v", err)
		}
		_, yErr = e.deduct(1, "k", items...)
		cmd.SetErr(errInjected)
		return errInjected
	}})
	if _, err := x.Deduct(t.Context(), 1, "k", items); !errors.Is(err, quota.ErrUnavailable) {
		t.Fatalf("X, its reply lost: %v; want ErrUnavailable", err)
	}
	if !fired || yErr != nil {
		t.Fatalf("Y, replaying X's steps: %v (hook fired %v); want 200", yErr, fired)
	}
	checkGranted(t, e, day, 1, replayIDs, map[string][]quota.Item{"k": items})
}
