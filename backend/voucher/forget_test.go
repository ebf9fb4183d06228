package voucher_test

import (
	"context"
	"testing"
	"time"

	"vouchergate/backend/voucher"
)

// A flash voucher's keys leave Redis once it ended the keep period ago, and only then: one
// that ended more recently, or is open, keeps them; one older than the week the job looks back
// over is not listed again (its keys went when it was due). The database keeps every voucher.
func TestForgetEndedDeletesOnlyVouchersDue(t *testing.T) {
	e := newEnv(t, voucher.Config{}, nil)
	ctx := context.Background()
	const keep = 7 * 24 * time.Hour
	now := time.Now()
	load := func(code string, ended time.Duration) voucher.Voucher {
		t.Helper()
		v := voucher.Voucher{Code: code, DiscountAmount: 10, TotalLimit: 5, PerUserLimit: 1,
			StartsAt: now.Add(-ended - time.Hour), EndsAt: now.Add(-ended), FlashSale: true}
		if err := e.store.CreateVoucher(ctx, v); err != nil {
			t.Fatal(err)
		}
		if _, err := e.gate.Load(ctx, v, nil); err != nil {
			t.Fatal(err)
		}
		return v
	}
	due := load("DUE", keep+time.Hour)
	recent := load("RECENT", 2*24*time.Hour)
	open := load("OPEN", -time.Hour) // ends in an hour
	ancient := load("ANCIENT", keep+8*24*time.Hour)
	loaded := func(code string) bool {
		t.Helper()
		n, err := e.rdb.Exists(ctx, e.keys(code).List()...).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}

	n, err := e.svc.ForgetEnded(ctx, keep)
	if err != nil || n != 1 {
		t.Fatalf("forget: %d, %v; want 1 (DUE)", n, err)
	}
	for v, want := range map[voucher.Voucher]bool{due: false, recent: true, open: true, ancient: true} {
		if got := loaded(v.Code); got != want {
			t.Errorf("%s in Redis after forgetting: %v; want %v", v.Code, got, want)
		}
	}
	if n, err := e.svc.ForgetEnded(ctx, keep); err != nil || n != 0 {
		t.Errorf("forget again: %d, %v; want 0", n, err)
	}
	if _, err := e.store.Voucher(ctx, due.Code); err != nil {
		t.Errorf("the forgotten voucher in the database: %v; want it kept", err)
	}
}
