package quota_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest/history"
	"vouchergate/backend/quota"
)

// Two attempts of one idemKey run at once (a client's retry while its first try still runs):
// whatever the interleaving, a deduct answered 200 stays counted until its rollback. Each
// scenario is forced with hooks on the first attempt's Redis client; the attempts run on two
// services (two backends) over the same keys. Identities are visited DEVICE, then USER.
func TestReplayIsNeverUndone(t *testing.T) {
	servers(t, func(t *testing.T, rdb redis.UniversalClient) {
		t.Run("reply lost", func(t *testing.T) { replyLost(t, rdb) })
		t.Run("refused, then completed by a replay", func(t *testing.T) { refusedThenCompleted(t, rdb) })
		t.Run("replayed, then refused", func(t *testing.T) { replayedThenRefused(t, rdb) })
		t.Run("replayed and refused while the first completes", func(t *testing.T) { refusedWhileFirstCompletes(t, rdb) })
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
	rec := history.For(t)
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
		_, yErr = deductIn(rec, e.svc, 1, "k", items...)
		cmd.SetErr(errInjected)
		return errInjected
	}})
	if _, err := deductIn(rec, x, 1, "k", items...); !errors.Is(err, quota.ErrUnavailable) {
		t.Fatalf("X, its reply lost: %v; want ErrUnavailable", err)
	}
	if !fired || yErr != nil {
		t.Fatalf("Y, replaying X's steps: %v (hook fired %v); want 200", yErr, fired)
	}
	checkGranted(t, e, day, 1, replayIDs, map[string][]quota.Item{"k": items})
}

// X takes DEVICE and is refused at USER (another order holds it). Before X gives DEVICE back,
// that order is rolled back and Y replays DEVICE, takes USER and answers 200. X must leave
// DEVICE counted.
func refusedThenCompleted(t *testing.T, rdb redis.UniversalClient) {
	e, day, items := replayEnv(t, rdb)
	rec := history.For(t)
	if _, err := deductIn(rec, e.svc, 1, "other", item("USER", "u", 1, "ITEM:1")); err != nil {
		t.Fatal(err)
	}
	var yErr error
	fired := false
	x := e.backend(t, cmdHook{process: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if fired || !isStep(cmd, "USER:u") {
			return next(ctx, cmd)
		}
		fired = true
		err := next(ctx, cmd) // refused: "other" holds USER u
		if _, err := rollbackIn(rec, e.svc, 1, "other"); err != nil {
			t.Errorf("rollback other: %v", err)
		}
		_, yErr = deductIn(rec, e.svc, 1, "k", items...)
		return err
	}})
	_, err := deductIn(rec, x, 1, "k", items...)
	if !errors.Is(err, quota.ErrQuotaExceeded) && !errors.Is(err, quota.ErrUnavailable) {
		t.Fatalf("X, refused at USER: %v; want ErrQuotaExceeded or ErrUnavailable", err)
	}
	if !fired || yErr != nil {
		t.Fatalf("Y, after room came back: %v (hook fired %v); want 200", yErr, fired)
	}
	checkGranted(t, e, day, 1, replayIDs, map[string][]quota.Item{"k": items})
}

// Y replays X's DEVICE step and waits before its USER step; X is refused at USER and gives
// back; then room comes back and Y goes on. Y must not answer 200 for a DEVICE step that X gave
// back; whatever it answers, the counters hold what the 200s took, and the client's retry
// of Y's answer settles the request.
func replayedThenRefused(t *testing.T, rdb redis.UniversalClient) {
	e, day, items := replayEnv(t, rdb)
	rec := history.For(t)
	if _, err := deductIn(rec, e.svc, 1, "other", item("USER", "u", 1, "ITEM:1")); err != nil {
		t.Fatal(err)
	}
	yAtUser, release, yDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	yFired := false
	y := e.backend(t, cmdHook{process: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if !yFired && isStep(cmd, "USER:u") {
			yFired = true
			close(yAtUser)
			<-release
		}
		return next(ctx, cmd)
	}})
	var yErr error
	xFired := false
	x := e.backend(t, cmdHook{process: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if !xFired && isStep(cmd, "USER:u") {
			xFired = true
			go func() {
				defer close(yDone)
				_, yErr = deductIn(rec, y, 1, "k", items...)
			}()
			<-yAtUser // Y has replayed DEVICE
		}
		return next(ctx, cmd)
	}})
	if _, err := deductIn(rec, x, 1, "k", items...); !errors.Is(err, quota.ErrQuotaExceeded) {
		close(release)
		<-yDone
		t.Fatalf("X, refused at USER: %v; want ErrQuotaExceeded", err)
	}
	if _, err := rollbackIn(rec, e.svc, 1, "other"); err != nil {
		t.Fatal(err)
	}
	close(release)
	<-yDone
	t.Logf("Y answered %v", yErr)
	granted := map[string][]quota.Item{}
	switch {
	case yErr == nil:
		granted["k"] = items
	case !errors.Is(yErr, quota.ErrUnavailable) && !errors.Is(yErr, quota.ErrQuotaExceeded):
		t.Fatalf("Y: %v", yErr)
	}
	checkGranted(t, e, day, 1, replayIDs, granted)
	if yErr == nil {
		return
	}
	// the client retries after Y's 503: now there is room
	if _, err := deductIn(rec, e.svc, 1, "k", items...); err != nil {
		t.Fatalf("a retry after Y's %v: %v; want 200", yErr, err)
	}
	checkGranted(t, e, day, 1, replayIDs, map[string][]quota.Item{"k": items})
}

// X takes DEVICE; Z replays it (Z holds it now) and is refused at USER. Before Z gives back,
// room comes back and X takes USER. Z must not give back DEVICE if X answers 200, nor X
// answer 200 on a DEVICE step that Z gives back.
func refusedWhileFirstCompletes(t *testing.T, rdb redis.UniversalClient) {
	e, day, items := replayEnv(t, rdb)
	rec := history.For(t)
	if _, err := deductIn(rec, e.svc, 1, "other", item("USER", "u", 1, "ITEM:1")); err != nil {
		t.Fatal(err)
	}
	zRefused, zGo, zDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	zFired := false
	z := e.backend(t, cmdHook{process: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if zFired || !isStep(cmd, "USER:u") {
			return next(ctx, cmd)
		}
		zFired = true
		err := next(ctx, cmd) // refused: "other" holds USER u
		close(zRefused)
		<-zGo
		return err
	}})
	var zErr error
	xFired := false
	x := e.backend(t, cmdHook{process: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if !xFired && isStep(cmd, "USER:u") {
			xFired = true
			go func() {
				defer close(zDone)
				_, zErr = deductIn(rec, z, 1, "k", items...)
			}()
			<-zRefused
			if _, err := rollbackIn(rec, e.svc, 1, "other"); err != nil {
				t.Errorf("rollback other: %v", err)
			}
		}
		return next(ctx, cmd)
	}})
	_, xErr := deductIn(rec, x, 1, "k", items...)
	close(zGo)
	<-zDone
	t.Logf("X answered %v, Z %v", xErr, zErr)
	granted := map[string][]quota.Item{}
	for _, err := range []error{xErr, zErr} {
		switch {
		case err == nil:
			granted["k"] = items
		case !errors.Is(err, quota.ErrUnavailable) && !errors.Is(err, quota.ErrQuotaExceeded):
			t.Fatalf("an attempt answered %v", err)
		}
	}
	checkGranted(t, e, day, 1, replayIDs, granted)
	if len(granted) == 0 {
		if _, err := deductIn(rec, e.svc, 1, "k", items...); err != nil {
			t.Fatalf("the client's retry: %v; want 200", err)
		}
		checkGranted(t, e, day, 1, replayIDs, map[string][]quota.Item{"k": items})
	}
}
