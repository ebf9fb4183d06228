package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"vouchergate/backend/store"
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

	for _, holds := range ackedBatches("ACK", now) {
		proxy.TerminateAfterOnce("commit")
		out, err := s.ReserveMany(context.Background(), "ACK", holds)
		<-proxy.Settled()
		checkWrittenAfterAck(t, pool, "ACK", holds, out, err)
	}
	if proxy.Cuts() != 2 {
		t.Fatalf("the proxy terminated %d connections, want 2", proxy.Cuts())
	}
	if used := checkDB(t, pool, "ACK"); used != 3 {
		t.Errorf("used_count %d, want 3", used)
	}
}

// As above, in pgx's default mode, the one the backend runs: a connection prepares the batch's
// statements once, then sends them by name, the whole batch in one pipeline. The proxy sees
// COMMIT's prepared statement name in the pipeline that runs it, on the pool's one connection
// once a first batch has prepared the statements there.
func TestReserveManyAfterAnAcknowledgedCommitIsWrittenInPipelineMode(t *testing.T) {
	dbURL := testkit.Database(t)
	s0, pool := openStore(t, dbURL)
	createVoucher(t, s0, "ACKP", 10, 1)
	proxy := testkit.StartCutProxy(t, "127.0.0.1:5432")
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy.Addr // pgx's own exec mode, unlike proxy.URL's
	ctx := context.Background()
	one, err := store.Open(ctx, u.String(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(one.Close)
	s := store.New(one)
	now := time.Now()

	for i, holds := range ackedBatches("ACKP", now) {
		prepare := hold("ACKP", fmt.Sprintf("c-prepare-%d", i), fmt.Sprintf("o-prepare-%d", i), now)
		if out, err := s.ReserveMany(ctx, "ACKP", []voucher.Hold{prepare}); err != nil || out[0].Err != nil {
			t.Fatalf("the batch that prepares the statements: %v %v", err, out)
		}
		proxy.TerminateAfterOnce(preparedName("commit"))
		out, err := s.ReserveMany(ctx, "ACKP", holds)
		if proxy.Cuts() != i+1 {
			t.Fatalf("the proxy terminated %d connections, want %d: pgx no longer names COMMIT %s", proxy.Cuts(), i+1, preparedName("commit"))
		}
		<-proxy.Settled()
		checkWrittenAfterAck(t, pool, "ACKP", holds, out, err)
	}
	if used := checkDB(t, pool, "ACKP"); used != 5 {
		t.Errorf("used_count %d, want 5", used)
	}
}

// ackedBatches are the batches whose COMMIT is acknowledged and then followed by a 57P01: a lone
// hold (a batch of one has no one-by-one pass to fall back on), then two.
func ackedBatches(code string, now time.Time) [][]voucher.Hold {
	return [][]voucher.Hold{
		{hold(code, "c-1", "o-1", now)},
		{hold(code, "c-2", "o-2", now), hold(code, "c-3", "o-3", now)},
	}
}

// checkWrittenAfterAck fails the test unless ReserveMany answered each of holds, a batch whose
// COMMIT was acknowledged before the 57P01, as written from its own row.
func checkWrittenAfterAck(t *testing.T, pool *pgxpool.Pool, code string, holds []voucher.Hold, out []voucher.Written, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%d holds, COMMIT acknowledged then 57P01: %v; want them written", len(holds), err)
	}
	for i, w := range out {
		if w.Err != nil {
			t.Errorf("hold %s after an acknowledged COMMIT: %v", holds[i].OrderID, w.Err)
		}
	}
	checkOwnRows(t, pool, code, holds, out)
}

// preparedName is the name pgx gives sql's prepared statement in its statement cache.
func preparedName(sql string) string {
	digest := sha256.Sum256([]byte(sql))
	return "stmtcache_" + hex.EncodeToString(digest[:24])
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
