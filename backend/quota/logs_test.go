package quota_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/quota"
	"vouchergate/testkit"
)

// A refused deduct whose earlier step cannot be given back logs it, but at most once a second
// for its business line, the next line counting those left out (dropped=), however many deducts
// meet the failure.
func TestFailedUndosAreLoggedOnceASecond(t *testing.T) {
	e := newEnv(t, time.Date(2025, 3, 3, 10, 0, 0, 0, time.UTC))
	day := calendar(t, quota.Day, "UTC")
	e.rule(t, 1, "DEVICE", "ITEM:1", 100, day)
	e.rule(t, 1, "USER", "ITEM:1", 1, day)
	if _, err := e.deduct(1, "full", item("USER", "u", 1, "ITEM:1")); err != nil {
		t.Fatal(err)
	}
	log, logged := testkit.CaptureLog()
	cfg := e.cfg
	cfg.Log = log
	cfg.Redis = hookedClient(t, e.rdb, cmdHook{process: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isUndo(cmd) {
			cmd.SetErr(errInjected)
			return errInjected
		}
		return next(ctx, cmd)
	}})
	svc := e.start(t, cfg)
	deduct := func(key string) {
		t.Helper()
		// DEVICE is visited first and taken; USER is full, so DEVICE's step is given back, which fails
		_, err := svc.Deduct(t.Context(), 1, key, []quota.Item{item("USER", "u", 1, "ITEM:1"), item("DEVICE", "d", 1, "ITEM:1")})
		if !errors.Is(err, quota.ErrUnavailable) {
			t.Fatalf("deduct %s: %v; want ErrUnavailable (a step not given back)", key, err)
		}
	}
	const n = 10
	for i := range n {
		deduct(fmt.Sprintf("k-%d", i))
	}
	const line = "quota: give back a deduct step"
	if got := strings.Count(logged(), line); got != 1 {
		t.Fatalf("%d failed undos within a second wrote %d lines; want 1:\n%s", n, got, logged())
	}
	e.clock.Advance(time.Second)
	deduct("later")
	lines := strings.Split(strings.TrimSpace(logged()), "\n")
	var last string
	for _, l := range lines {
		if strings.Contains(l, line) {
			last = l
		}
	}
	if got := strings.Count(logged(), line); got != 2 || !strings.Contains(last, fmt.Sprintf("dropped=%d", n-1)) || !strings.Contains(last, "bizId=1") {
		t.Fatalf("a second later: %d lines, the last %q; want 2, the last with bizId=1 and dropped=%d", got, last, n-1)
	}
}
