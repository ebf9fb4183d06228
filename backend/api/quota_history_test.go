package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/backend/backendtest/history"
	"vouchergate/shared/wire"
)

// deductRecorded sends req to POST /quotas/deduct through b, recorded in rec as the quota model
// reads it: a 200 with its counters, a 4xx a refusal, anything else unknown. It returns the
// status, the body and the Retry-After header.
func deductRecorded(t *testing.T, rec *history.Recorder, b *backendtest.Backend, req wire.QuotaDeductRequest) (int, []byte, string) {
	t.Helper()
	op := history.Op{Kind: history.Deduct, Biz: req.BizID, IdemKey: req.IdemKey}
	for _, it := range req.Items {
		amount := int64(1)
		if it.Amount != nil {
			amount = *it.Amount
		}
		op.Items = append(op.Items, history.Item{Type: it.IdentityType, Identity: it.Identity, Dimensions: it.Dimensions, Amount: amount})
	}
	call := rec.Begin(op)
	st, body, h := b.DoWithHeaders(t, "POST", "/quotas/deduct", req, nil)
	call.Op.Status = st
	switch {
	case st == 0:
		call.Info("no answer")
	case st == 200:
		var res wire.QuotaDeductResponse
		if err := json.Unmarshal(body, &res); err != nil {
			call.Info("unreadable answer")
			t.Errorf("deduct %s: 200 %s: %v", req.IdemKey, body, err)
			break
		}
		for _, c := range res.Counters {
			call.Op.Counters = append(call.Op.Counters, historyCounter(c))
		}
		call.Ok()
	case st >= 400 && st < 500:
		var e wire.Error
		_ = json.Unmarshal(body, &e)
		call.Fail(e.Error)
	default:
		call.Info(string(body))
	}
	return st, body, string(h.Peek("Retry-After"))
}

// historyCounter is a counter as the quota model names it: its window by type, zone and size,
// its period by when it resets (none for a rolling window, whose one counter lasts).
func historyCounter(c wire.QuotaCounter) history.Counter {
	hc := history.Counter{Type: c.IdentityType, Identity: c.Identity, Dimension: c.Dimension,
		Window: c.Window.Type + "/" + c.Window.Timezone + c.Window.Size, Used: c.Used, Limit: c.Limit}
	if c.Window.Type != "ROLLING" && c.ResetsAt != nil {
		hc.Period = c.ResetsAt.UTC().Format(time.RFC3339)
	}
	return hc
}
