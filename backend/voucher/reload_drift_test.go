package voucher_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/voucher"
)

// Redis comes back without the voucher (a restart without its data): reconciliation loads it
// again from the rows and compares what it loaded with the rows, which agree. That is no
// drift: the report says 0 and nothing is logged as drifted, though Redis held no uses
// left before the load.
func TestAReloadIsNoDrift(t *testing.T) {
	var logs bytes.Buffer
	e := newEnv(t, voucher.Config{Log: slog.New(slog.NewTextHandler(&logs, nil))}, nil)
	ctx := context.Background()
	v := e.createFlash(t, "RELOADED", 10, 1)
	if err := e.svc.Warm(ctx, v.Code); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := e.svc.Reserve(ctx, request(v.Code, fmt.Sprintf("c-%d", i), fmt.Sprintf("o-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.rdb.Del(ctx, e.keys(v.Code).List()...).Err(); err != nil { // Redis restarted empty
		t.Fatal(err)
	}
	rep, err := e.svc.Reconcile(ctx, v.Code, voucher.ReconcileConfig{Grace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Loaded || rep.Drift != 0 || rep.RemainingBefore != 7 || rep.RemainingAfter != 7 || rep.Recounted {
		t.Errorf("reconciliation after a reload: %+v; want loaded, 7 uses left before and after, no drift, nothing recounted", rep)
	}
	if strings.Contains(logs.String(), "drifted") {
		t.Errorf("a reload was logged as drift:\n%s", logs.String())
	}
	checkHeldAsWritten(t, e, v.Code)
}
