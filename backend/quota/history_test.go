package quota_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"vouchergate/backend/backendtest/history"
	"vouchergate/backend/quota"
	"vouchergate/shared/wire"
)

// A concurrency test's deducts, rollbacks and usage reads are recorded in its history
// (history.For(t), or a recorder of its own), checked against the quota model: each
// identity's counters, its idemKeys counted once and rolled back once.

// deductIn is svc.Deduct recorded in rec.
func deductIn(rec *history.Recorder, svc *quota.Service, biz int64, key string, items ...quota.Item) (quota.DeductResult, error) {
	c := rec.Begin(history.Op{Kind: history.Deduct, Biz: biz, IdemKey: key, Items: historyItems(items)})
	res, err := svc.Deduct(context.Background(), biz, key, items)
	if err == nil {
		c.Op.Counters = counters(res.Counters)
		c.Ok()
		return res, nil
	}
	end(c, err)
	return res, err
}

// rollbackIn is svc.Rollback recorded in rec.
func rollbackIn(rec *history.Recorder, svc *quota.Service, biz int64, key string) (quota.RollbackResult, error) {
	return rollbackCall(rec, history.Op{Kind: history.Rollback, Biz: biz, IdemKey: key}, func() (quota.RollbackResult, error) {
		return svc.Rollback(context.Background(), biz, key)
	})
}

// partialIn is svc.RollbackItems recorded in rec.
func partialIn(rec *history.Recorder, svc *quota.Service, biz int64, key, rollbackKey string, items ...quota.Item) (quota.RollbackResult, error) {
	op := history.Op{Kind: history.PartialRollback, Biz: biz, IdemKey: key, RollbackKey: rollbackKey, Items: historyItems(items)}
	return rollbackCall(rec, op, func() (quota.RollbackResult, error) {
		return svc.RollbackItems(context.Background(), biz, key, rollbackKey, items)
	})
}

// rollbackCall records op in rec around roll, with what it gave back.
func rollbackCall(rec *history.Recorder, op history.Op, roll func() (quota.RollbackResult, error)) (quota.RollbackResult, error) {
	c := rec.Begin(op)
	res, err := roll()
	if err == nil {
		c.Op.Returned = returnedOf(res)
		c.Ok()
		return res, nil
	}
	end(c, err)
	return res, err
}

func historyItems(items []quota.Item) []history.Item {
	out := make([]history.Item, len(items))
	for i, it := range items {
		out[i] = history.Item{Type: it.IdentityType, Identity: it.Identity, Dimensions: it.Dimensions, Amount: it.Amount}
	}
	return out
}

// returnedOf is what a rollback gave back, for the history (Used is the amount).
func returnedOf(res quota.RollbackResult) []history.Counter {
	var out []history.Counter
	for _, r := range res.Returned {
		out = append(out, history.Counter{Type: r.IdentityType, Identity: r.Identity, Dimension: r.Dimension, Window: r.Window.ID(), Used: r.Amount})
	}
	return out
}

// usageIn is svc.Usage recorded in rec.
func usageIn(rec *history.Recorder, svc *quota.Service, biz int64, typ, identity string, dims []string) ([]quota.Counter, error) {
	c := rec.Begin(history.Op{Kind: history.Usage, Biz: biz, Identity: typ + ":" + identity})
	cs, err := svc.Usage(context.Background(), biz, typ, identity, dims)
	if err == nil {
		c.Op.Counters = counters(cs)
		c.Ok()
		return cs, nil
	}
	end(c, err)
	return cs, err
}

// end ends a call that failed: refused (nothing was done) or unknown.
func end(c *history.Call, err error) {
	switch {
	case errors.Is(err, quota.ErrUnavailable):
		c.Info(err.Error())
	case errors.Is(err, quota.ErrQuotaExceeded):
		c.Fail(wire.CodeQuotaExceeded)
	case errors.Is(err, quota.ErrRolledBack):
		c.Fail(wire.CodeQuotaRolledBack)
	case errors.Is(err, quota.ErrIdemKeyReused):
		c.Fail(wire.CodeIdemKeyReused)
	case errors.Is(err, quota.ErrRollbackKeyReused):
		c.Fail(wire.CodeRollbackKeyReused)
	case errors.Is(err, quota.ErrInvalid):
		c.Fail(wire.CodeBadRequest)
	default:
		c.Info(err.Error())
	}
}

// counters converts counters for the history: a calendar or fixed counter is named by its
// period's end, a rolling window's has one counter.
func counters(cs []quota.Counter) []history.Counter {
	out := make([]history.Counter, len(cs))
	for i, c := range cs {
		out[i] = history.Counter{Type: c.IdentityType, Identity: c.Identity, Dimension: c.Dimension,
			Window: c.Window.ID(), Used: c.Used, Limit: c.Limit}
		if c.Window.Type != quota.Rolling {
			out[i].Period = c.ResetsAt.UTC().Format(time.RFC3339)
		}
	}
	return out
}

// wantRejected fails t unless the checker rejects rec's history, which lost what it says, and
// logs what the checker found: the harness bites, and so does the checker.
func wantRejected(t *testing.T, rec *history.Recorder, lost string) {
	t.Helper()
	res := rec.Check()
	if res.Linearizable() {
		t.Errorf("the checker accepted a history with %s", lost)
		return
	}
	t.Logf("the checker rejects the history with %s, as it must:\n%s", lost, res.Report(""))
}
