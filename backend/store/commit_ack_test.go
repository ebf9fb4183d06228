package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"vouchergate/backend/voucher"
	"vouchergate/testkit"
)

// The server acknowledges COMMIT and then terminates the connection (57P01, as
// pg_terminate_backend or a fast shutdown does) before its ReadyForQuery: the batch is written,
// and each hold is answered as written, a lone hold too.
func TestReserveManyAfterAnAcknowledgedCommitIsWritten(t *testing.T) {
	dbURL := testkit.Database(t)
	s0, pool := openStore(t, dbURL)
	createVoucher(t, s0, "ACK", 10, 1)
	proxy := testkit.StartCutProxy(t, "127.0.0.1:5432")
	s, _ := openStore(t, proxy.URL(dbURL))
	now := time.Now()

	for _, holds := range [][]voucher.Hold{
		{hold("ACK", "c-1", "o-1", now)},
		{hold("ACK", "c-2", "o-2", now), hold("ACK", "c-3", "o-3", now)},
	} {
		proxy.TerminateAfterOnce("commit")
		out, err := s.ReserveMany(context.Background(), "ACK", holds)
		<-proxy.Settled()
		if err != nil {
			t.Fatalf("%d holds, COMMIT acknowledged then 57P01: %v; want them written", len(holds), err)
		}
		for i, w := range out {
			if w.Err != nil {
				t.Errorf("hold %s after an acknowledged COMMIT: %v", holds[i].OrderID, w.Err)
			}
		}
		checkOwnRows(t, pool, "ACK", holds, out)
	}
	if proxy.Cuts() != 2 {
		t.Fatalf("the proxy terminated %d connections, want 2", proxy.Cuts())
	}
	if used := checkDB(t, pool, "ACK"); used != 3 {
		t.Errorf("used_count %d, want 3", used)
	}
}

// The single-row path commits at the Sync after its statement: a 57P01 in place of the Sync's
// ReadyForQuery may follow the commit, so the outcome is unknown, never "not written".
func TestReserveTerminatedAtItsSyncIsUnknown(t *testing.T) {
	dbURL := testkit.Database(t)
	s0, pool := openStore(t, dbURL)
	createVoucher(t, s0, "ACK1", 10, 1)
	proxy := testkit.StartCutProxy(t, "127.0.0.1:5432")
	s, _ := openStore(t, proxy.URL(dbURL))

	now := time.Now()
	proxy.TerminateAfterOnce("insert into redemptions")
	_, err := s.Reserve(context.Background(), hold("ACK1", "c-1", "o-1", now), now)
	<-proxy.Settled()
	if err == nil || errors.Is(err, voucher.ErrNotWritten) {
		t.Errorf("terminated at the Sync: got %v, want an unknown outcome", err)
	}
	if used := checkDB(t, pool, "ACK1"); used != 1 {
		t.Errorf("used_count %d, want 1 (the server committed)", used)
	}
}
