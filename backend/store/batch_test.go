package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"vouchergate/backend/store"
	"vouchergate/backend/voucher"
	"vouchergate/testkit"
)

// openStore migrates a fresh database at url (the test's own unless given) and returns a store
// on it with its pool.
func openStore(t *testing.T, url ...string) (*store.Store, *pgxpool.Pool) {
	return openStoreB(t, url...)
}

func openStoreB(t testing.TB, url ...string) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	dbURL := testkit.Database(t)
	if len(url) > 0 {
		dbURL = url[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := store.Open(ctx, dbURL, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	return store.New(pool), pool
}

func createVoucher(t *testing.T, s *store.Store, code string, total, perUser int) voucher.Voucher {
	return createVoucherB(t, s, code, total, perUser)
}

func createVoucherB(t testing.TB, s *store.Store, code string, total, perUser int) voucher.Voucher {
	t.Helper()
	v := voucher.Voucher{Code: code, DiscountAmount: 100, TotalLimit: total, PerUserLimit: perUser,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour), FlashSale: true}
	if err := s.CreateVoucher(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	return v
}

func hold(code, customer, order string, at time.Time) voucher.Hold {
	return voucher.Hold{VoucherCode: code, CustomerID: customer, OrderID: order, OrderAmount: 500,
		DiscountAmount: 100, ReservedAt: at, ExpiresAt: at.Add(15 * time.Minute)}
}

// checkDB fails the test unless D1–D3 hold for code, and returns used_count.
func checkDB(t *testing.T, pool *pgxpool.Pool, code string) int {
	t.Helper()
	var used, total, active, perUser, over, rows, orders int
	err := pool.QueryRow(context.Background(), `SELECT used_count, total_limit, per_user_limit,
		(SELECT count(*) FROM redemptions WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED')),
		(SELECT count(*) FROM (SELECT 1 FROM redemptions WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED')
			GROUP BY customer_id HAVING count(*) > v.per_user_limit) x),
		(SELECT count(*) FROM redemptions), (SELECT count(DISTINCT order_id) FROM redemptions)
		FROM vouchers v WHERE code = $1`, code).Scan(&used, &total, &perUser, &active, &over, &rows, &orders)
	if err != nil {
		t.Fatal(err)
	}
	if used != active || used > total {
		t.Errorf("D1 %s: used_count %d, active %d, total %d", code, used, active, total)
	}
	if over != 0 {
		t.Errorf("D2 %s: %d customers above %d", code, over, perUser)
	}
	if rows != orders {
		t.Errorf("D3: %d rows for %d orders", rows, orders)
	}
	return used
}

// One batch mixing holds the database refuses with good ones: each refused hold gets the answer
// Reserve would give it alone, and every other hold is written.
func TestReserveManyAnswersEachHoldOnItsOwn(t *testing.T) {
	s, pool := openStore(t)
	ctx := context.Background()
	now := time.Now()
	createVoucher(t, s, "MIX", 6, 2)
	other := createVoucher(t, s, "OTHER", 10, 1)
	if _, err := s.Reserve(ctx, hold("MIX", "c-a", "o-before", now), now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, hold(other.Code, "c-x", "o-other", now), now); err != nil {
		t.Fatal(err)
	}

	holds := []voucher.Hold{
		hold("MIX", "c-a", "o-1", now),                  // c-a's second slot
		hold("MIX", "c-a", "o-2", now),                  // c-a at its limit of 2
		hold("MIX", "c-b", "o-before", now),             // order already written
		hold("MIX", "c-b", "o-other", now),              // order written for another voucher
		hold("MIX", "c-b", "o-3", now.Add(2*time.Hour)), // reserved after the voucher ended
		hold("MIX", "c-b", "o-4", now),
		hold("MIX", "c-c", "o-5", now),
		hold("MIX", "c-c", "o-5", now), // the same order twice in one batch
		hold("MIX", "c-d", "o-6", now),
		hold("MIX", "c-e", "o-7", now), // the 6th use
		hold("MIX", "c-f", "o-8", now), // none left
	}
	want := []error{nil, voucher.ErrAlreadyUsed, voucher.ErrOrderExists, voucher.ErrOrderExists,
		voucher.ErrNotEligible, nil, nil, voucher.ErrOrderExists, nil, nil, voucher.ErrOutOfStock}
	out, err := s.ReserveMany(ctx, "MIX", holds)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		if !errors.Is(out[i].Err, w) || (w == nil && out[i].Err != nil) {
			t.Errorf("hold %d (%s): got %v, want %v", i, holds[i].OrderID, out[i].Err, w)
		}
		if w == nil && (out[i].Redemption.OrderID != holds[i].OrderID || out[i].Redemption.Status != "RESERVED") {
			t.Errorf("hold %d: redemption %+v", i, out[i].Redemption)
		}
	}
	if used := checkDB(t, pool, "MIX"); used != 6 {
		t.Errorf("used_count %d, want 6", used)
	}
}

// Holds the batch's statement cannot write together (one customer twice, where the second
// needs the slot the first has just taken; an order a release freed the customer of) are
// written on their own afterwards, in order, and get what Reserve gives them.
func TestReserveManyWritesWhatItsStatementSkippedOneByOne(t *testing.T) {
	s, pool := openStore(t)
	ctx := context.Background()
	now := time.Now()
	createVoucher(t, s, "TWICE", 3, 2)
	holds := []voucher.Hold{
		hold("TWICE", "c-1", "o-1", now),
		hold("TWICE", "c-1", "o-2", now), // slot 1 is o-1's: slot 2
		hold("TWICE", "c-1", "o-3", now), // both slots taken
		hold("TWICE", "c-2", "o-4", now), // the 3rd use
		hold("TWICE", "c-3", "o-5", now), // none left
	}
	want := []error{nil, nil, voucher.ErrAlreadyUsed, nil, voucher.ErrOutOfStock}
	out, err := s.ReserveMany(ctx, "TWICE", holds)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		if !errors.Is(out[i].Err, w) || (w == nil && out[i].Err != nil) {
			t.Errorf("hold %d (%s): got %v, want %v", i, holds[i].OrderID, out[i].Err, w)
		}
	}
	var slots []int
	if err := pool.QueryRow(ctx, `SELECT array_agg(slot ORDER BY slot) FROM redemptions WHERE customer_id = 'c-1'`).Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(slots) != "[1 2]" {
		t.Errorf("c-1's slots %v, want [1 2]", slots)
	}
	if used := checkDB(t, pool, "TWICE"); used != 3 {
		t.Errorf("used_count %d, want 3", used)
	}
}

// The database's own guards stand behind the batch's decisions: a hold no decision refuses but
// a CHECK does (a customer id over 64 bytes) sends the batch through Reserve one by one, and only
// that hold fails, as certainly not written.
func TestReserveManyFallsBackOneByOneWhenTheDatabaseRefusesTheBatch(t *testing.T) {
	s, pool := openStore(t)
	now := time.Now()
	createVoucher(t, s, "CHK", 10, 1)
	holds := []voucher.Hold{
		hold("CHK", "c-1", "o-1", now),
		hold("CHK", strings.Repeat("x", 65), "o-2", now),
		hold("CHK", "c-3", "o-3", now),
	}
	out, err := s.ReserveMany(context.Background(), "CHK", holds)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Err != nil || out[2].Err != nil {
		t.Errorf("good holds failed: %v, %v", out[0].Err, out[2].Err)
	}
	if !errors.Is(out[1].Err, voucher.ErrNotWritten) {
		t.Errorf("refused hold: %v, want ErrNotWritten", out[1].Err)
	}
	if used := checkDB(t, pool, "CHK"); used != 2 {
		t.Errorf("used_count %d, want 2", used)
	}
}

// A voucher closed by an operator while its sale runs: the batch reads the end under the row
// lock and refuses every later hold as not eligible.
func TestReserveManyRefusesAVoucherClosedMidSale(t *testing.T) {
	s, pool := openStore(t)
	ctx := context.Background()
	now := time.Now()
	createVoucher(t, s, "CLOSE", 10, 1)
	if _, err := s.ReserveMany(ctx, "CLOSE", []voucher.Hold{hold("CLOSE", "c-1", "o-1", now)}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE vouchers SET ends_at = $2 WHERE code = $1`, "CLOSE", now.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	late := now.Add(time.Second)
	out, err := s.ReserveMany(ctx, "CLOSE", []voucher.Hold{hold("CLOSE", "c-2", "o-2", late), hold("CLOSE", "c-3", "o-3", late)})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range out {
		if !errors.Is(w.Err, voucher.ErrNotEligible) {
			t.Errorf("hold %d after the close: %v", i, w.Err)
		}
	}
	if used := checkDB(t, pool, "CLOSE"); used != 1 {
		t.Errorf("used_count %d, want 1", used)
	}
	if _, err := s.ReserveMany(ctx, "NOPE", []voucher.Hold{hold("NOPE", "c", "o", now)}); !errors.Is(err, voucher.ErrVoucherNotFound) {
		t.Errorf("unknown voucher: %v", err)
	}
}

// Many writers batching one voucher at once, with releases and single reservations in between,
// serialize on the voucher's row and never pass a limit; the lock order keeps them free of
// deadlocks.
func TestConcurrentBatchesSerializeOnTheVoucherRow(t *testing.T) {
	s, pool := openStore(t)
	ctx := context.Background()
	createVoucher(t, s, "HOT", 500, 2)
	now := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range 10 {
				holds := make([]voucher.Hold, 10)
				for i := range holds {
					// 40 customers, each asked for by several writers
					holds[i] = hold("HOT", fmt.Sprintf("c-%d", (w*7+b*3+i)%40), fmt.Sprintf("o-%d-%d-%d", w, b, i), now)
				}
				out, err := s.ReserveMany(ctx, "HOT", holds)
				if err != nil {
					t.Error(err)
					return
				}
				for i, o := range out {
					switch {
					case o.Err == nil:
						mu.Lock()
						granted++
						mu.Unlock()
						if i%3 == 0 { // give some back, so slots free up under the batches
							if _, _, err := s.Release(ctx, "HOT", o.Redemption.OrderID, now); err != nil {
								t.Error(err)
							}
							mu.Lock()
							granted--
							mu.Unlock()
						}
					case !errors.Is(o.Err, voucher.ErrAlreadyUsed):
						t.Errorf("hold %s: %v", holds[i].OrderID, o.Err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if used := checkDB(t, pool, "HOT"); used != granted || used > 80 || used < 40 {
		t.Errorf("used_count %d, granted and kept %d, want them equal, between 40 and 80 (40 customers × 2)", used, granted)
	}
}

// COMMIT reaches the server, which commits, but its answer never comes back: the batch's outcome
// is unknown to the writer (not ErrNotWritten), and the rows are there.
func TestReserveManyCommitOutcomeUnknown(t *testing.T) {
	dbURL := testkit.Database(t)
	s0, pool := openStore(t, dbURL) // migrates, direct
	createVoucher(t, s0, "CUT", 10, 1)
	proxy := testkit.StartCutProxy(t, "127.0.0.1:5432")
	s, _ := openStore(t, proxy.URL(dbURL))

	now := time.Now()
	proxy.CutOnce("commit")
	_, err := s.ReserveMany(context.Background(), "CUT", []voucher.Hold{hold("CUT", "c-1", "o-1", now), hold("CUT", "c-2", "o-2", now)})
	if proxy.Cuts() != 1 {
		t.Fatalf("the proxy cut %d connections, want 1", proxy.Cuts())
	}
	<-proxy.Settled()
	if err == nil || errors.Is(err, voucher.ErrNotWritten) {
		t.Errorf("commit cut: got %v, want an unknown outcome", err)
	}
	if used := checkDB(t, pool, "CUT"); used != 2 {
		t.Errorf("used_count %d after the cut commit, want 2 (the server committed)", used)
	}
}

// The single-row path has the same blind spot: its statement reaches the server, which
// commits it, and the connection breaks before the answer. pgx then reports "conn closed",
// which it calls safe to retry; the store must still call the outcome unknown.
func TestReserveStatementOutcomeUnknown(t *testing.T) {
	dbURL := testkit.Database(t)
	s0, pool := openStore(t, dbURL)
	createVoucher(t, s0, "CUT1", 10, 1)
	proxy := testkit.StartCutProxy(t, "127.0.0.1:5432")
	s, _ := openStore(t, proxy.URL(dbURL))

	now := time.Now()
	proxy.CutOnce("insert into redemptions")
	_, err := s.Reserve(context.Background(), hold("CUT1", "c-1", "o-1", now), now)
	if proxy.Cuts() != 1 {
		t.Fatalf("the proxy cut %d connections, want 1", proxy.Cuts())
	}
	<-proxy.Settled()
	if err == nil || errors.Is(err, voucher.ErrNotWritten) {
		t.Errorf("statement cut: got %v, want an unknown outcome", err)
	}
	if used := checkDB(t, pool, "CUT1"); used != 1 {
		t.Errorf("used_count %d after the cut statement, want 1 (the server committed)", used)
	}
}

// The database refuses by itself what a wrong writer might send (DESIGN: "even if every layer
// above it is wrong"): a redemption whose per_user_limit is not its voucher's, or whose voucher
// does not exist, in a single insert or among a batch's; a voucher with redemptions keeps its
// code; a change of its per_user_limit is not carried to the rows already written (each keeps the
// limit its slot was taken under: a customer above a lowered limit keeps their holds), and a row
// written after it must match it.
func TestTheDatabaseGuardsRedemptionsAgainstTheirVoucher(t *testing.T) {
	s, pool := openStore(t)
	ctx := context.Background()
	createVoucher(t, s, "G", 10, 2)
	now := time.Now()
	if _, err := s.Reserve(ctx, hold("G", "c1", "o1", now), now); err != nil {
		t.Fatal(err)
	}
	insert := func(rows string) error {
		_, err := pool.Exec(ctx, `INSERT INTO redemptions (voucher_code, per_user_limit, customer_id, order_id, slot,
			status, order_amount, discount_amount, reserved_at, hold_expires_at) VALUES `+rows)
		return err
	}
	row := func(code string, limit, slot int, order string) string {
		return fmt.Sprintf("('%s', %d, 'cx', '%s', %d, 'RESERVED', 1, 1, now(), now())", code, limit, order, slot)
	}
	for name, rows := range map[string]string{
		"a per_user_limit above the voucher's": row("G", 5, 3, "w1"),
		"no such voucher":                      row("NOPE", 2, 1, "w2"),
		"one wrong row among good ones":        row("G", 2, 1, "w3") + ", " + row("G", 3, 3, "w4") + ", " + row("G", 2, 2, "w5"),
	} {
		if err := insert(rows); err == nil {
			t.Errorf("%s: inserted", name)
		}
	}
	if err := insert(row("G", 2, 1, "ok")); err != nil {
		t.Errorf("a matching row: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE vouchers SET code = 'G2' WHERE code = 'G'`); err == nil {
		t.Error("renamed a voucher that has redemptions")
	}
	if _, err := pool.Exec(ctx, `DELETE FROM vouchers WHERE code = 'G'`); err == nil {
		t.Error("deleted a voucher that has redemptions")
	}
	if _, err := pool.Exec(ctx, `UPDATE vouchers SET per_user_limit = 3 WHERE code = 'G'`); err != nil {
		t.Errorf("raise per_user_limit: %v", err)
	}
	var kept int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM redemptions WHERE voucher_code = 'G' AND per_user_limit = 2`).Scan(&kept); err != nil || kept != 2 {
		t.Errorf("%d of 2 redemptions kept the per_user_limit they were written under (%v)", kept, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE redemptions SET per_user_limit = 1 WHERE order_id = 'o1'`); err == nil {
		t.Error("a redemption's per_user_limit moved away from its voucher's")
	}
	if err := insert(row("G", 2, 2, "old-limit")); err == nil {
		t.Error("inserted a row under the per_user_limit before the change")
	}
	if _, err := pool.Exec(ctx, `UPDATE vouchers SET per_user_limit = 1 WHERE code = 'G'`); err != nil {
		t.Errorf("lower per_user_limit below the slots held: %v", err)
	}
	if err := insert(row("G", 1, 2, "slot2")); err == nil {
		t.Error("inserted a slot above per_user_limit")
	}
}
