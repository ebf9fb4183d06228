package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"vouchergate/backend/store"
	"vouchergate/backend/voucher"
	"vouchergate/testkit"
)

// reserveTracer is a pgx tracer that stops each of Reserve's statements before it is sent:
// it hands the try's number to the test on ready and waits for the test on proceed. It
// records how each try's statement ended.
type reserveTracer struct {
	ready   chan int
	proceed chan struct{}

	mu   sync.Mutex
	errs []error // per try
}

func isReserveSQL(sql string) bool { return strings.Contains(sql, "WITH take AS") }

func (r *reserveTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (r *reserveTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *reserveTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		if isReserveSQL(q.SQL) {
			r.mu.Lock()
			try := len(r.errs) + 1
			r.mu.Unlock()
			r.ready <- try
			<-r.proceed
		}
	}
	return ctx
}

func (r *reserveTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if isReserveSQL(d.SQL) {
		r.mu.Lock()
		r.errs = append(r.errs, d.Err)
		r.mu.Unlock()
	}
}

func (r *reserveTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (r *reserveTracer) outcomes() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// slotRace is a store whose Reserve statements the test can hold, and a connection of its own
// on which it takes a customer's slot in a transaction it commits when it chooses.
type slotRace struct {
	store  *store.Store
	pool   *pgxpool.Pool
	tracer *reserveTracer
	conn   *pgx.Conn
}

func newSlotRace(t *testing.T) *slotRace {
	t.Helper()
	url := testkit.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	tracer := &reserveTracer{ready: make(chan int), proceed: make(chan struct{})}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return &slotRace{store: store.New(pool), pool: pool, tracer: tracer, conn: conn}
}

// takeSlot takes a use of v for customer in the given slot, as a reservation does, in a
// transaction left open: it holds the voucher's row lock until commit.
func (s *slotRace) takeSlot(t *testing.T, ctx context.Context, v voucher.Voucher, customer, order string, slot int) pgx.Tx {
	t.Helper()
	tx, err := s.conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE vouchers SET used_count = used_count + 1 WHERE code = $1`, v.Code); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO redemptions (voucher_code, per_user_limit, customer_id, order_id, slot,
		status, order_amount, discount_amount, reserved_at, hold_expires_at)
		VALUES ($1, $2, $3, $4, $5, 'RESERVED', 500, 100, now(), now() + interval '15 minutes')`,
		v.Code, v.PerUserLimit, customer, order, slot); err != nil {
		t.Fatal(err)
	}
	return tx
}

// reserve runs Reserve of h in the background. Before each of its statements is sent, a
// try listed in compete meets a rival: the same customer's reservation, in the slot the
// statement will pick, is made and left open, so the statement waits on the voucher's row
// lock with a snapshot that cannot see the rival's slot; once it waits, the rival commits and
// the statement's insert hits the slot's unique index. It returns what Reserve returned.
func (s *slotRace) reserve(t *testing.T, v voucher.Voucher, h voucher.Hold, compete map[int]bool) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.store.Reserve(ctx, h, time.Now())
		done <- err
	}()
	for {
		select {
		case err := <-done:
			return err
		case try := <-s.tracer.ready:
			if !compete[try] {
				s.tracer.proceed <- struct{}{}
				continue
			}
			rival := s.takeSlot(t, ctx, v, h.CustomerID, fmt.Sprintf("rival-%d", try), try)
			s.tracer.proceed <- struct{}{}
			// Watched from the pool, not from the rival's connection: inside the rival's
			// transaction pg_stat_activity would show the same snapshot on every read.
			testkit.Eventually(t, "the reservation waiting for the rival's row lock", func() bool {
				var n int
				err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
					AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND query LIKE '%WITH take AS%'`).Scan(&n)
				return err == nil && n == 1
			})
			if err := rival.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func lostSlot(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "23505" && pg.ConstraintName == "redemptions_active_customer_slot"
}

// A reservation whose statement loses the customer's lowest free slot to a concurrent
// reservation of the same customer (its snapshot predates the row lock it waited for) is sent
// again, sees that slot taken and takes the next.
func TestReserveTakesTheNextSlotAfterLosingOne(t *testing.T) {
	s := newSlotRace(t)
	v := createVoucher(t, s.store, "SLOT", 10, 2)
	err := s.reserve(t, v, hold("SLOT", "c-1", "mine", time.Now()), map[int]bool{1: true})
	if err != nil {
		t.Fatalf("Reserve after losing a slot: %v", err)
	}
	outcomes := s.tracer.outcomes()
	if len(outcomes) != 2 || !lostSlot(outcomes[0]) || outcomes[1] != nil {
		t.Fatalf("statements sent: %v; want one that lost slot 1, then one that succeeded", outcomes)
	}
	var slot int
	if err := s.pool.QueryRow(context.Background(), `SELECT slot FROM redemptions WHERE order_id = 'mine'`).Scan(&slot); err != nil || slot != 2 {
		t.Fatalf("the reservation holds slot %d (%v); want 2", slot, err)
	}
	if used := checkDB(t, s.pool, "SLOT"); used != 2 {
		t.Fatalf("used_count %d; want the rival's use and this one", used)
	}
}

// A reservation that loses a slot on each of its tries gives up after slotTries (3) with
// ErrAlreadyUsed and takes nothing, though a fourth slot is free: the bound keeps a customer's
// crowd of reservations from retrying without end.
func TestReserveGivesUpAfterLosingASlotOnEveryTry(t *testing.T) {
	s := newSlotRace(t)
	v := createVoucher(t, s.store, "SLOTS", 10, 4)
	err := s.reserve(t, v, hold("SLOTS", "c-1", "mine", time.Now()), map[int]bool{1: true, 2: true, 3: true})
	if !errors.Is(err, voucher.ErrAlreadyUsed) {
		t.Fatalf("Reserve after losing a slot three times: %v; want ErrAlreadyUsed", err)
	}
	outcomes := s.tracer.outcomes()
	if len(outcomes) != 3 {
		t.Fatalf("%d statements sent; want 3", len(outcomes))
	}
	for i, err := range outcomes {
		if !lostSlot(err) {
			t.Errorf("try %d: %v; want it to lose slot %d", i+1, err, i+1)
		}
	}
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM redemptions WHERE order_id = 'mine'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows of the refused reservation (%v); want none", n, err)
	}
	if used := checkDB(t, s.pool, "SLOTS"); used != 3 {
		t.Fatalf("used_count %d; want the three rivals' uses", used)
	}
}
