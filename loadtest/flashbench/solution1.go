package flashbench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Solution 1's schema, the baseline design's two tables as it was given to this project
// (docs/BENCHMARKS.md describes it).
const seedSchema = `
CREATE TABLE voucher (
    code             VARCHAR(32) PRIMARY KEY,
    discount_amount  BIGINT      NOT NULL,
    min_order_amount BIGINT      NOT NULL DEFAULT 0,
    total_limit      INT         NOT NULL,
    used_count       INT         NOT NULL DEFAULT 0,
    per_user_limit   INT         NOT NULL DEFAULT 1,
    starts_at        TIMESTAMP   NOT NULL,
    ends_at          TIMESTAMP   NOT NULL,
    CONSTRAINT ck_used CHECK (used_count <= total_limit)
);

CREATE TABLE voucher_redemption (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    voucher_code VARCHAR(32) NOT NULL REFERENCES voucher(code),
    customer_id  BIGINT      NOT NULL,
    order_id     VARCHAR(64) NOT NULL UNIQUE,
    status       VARCHAR(16) NOT NULL, -- RESERVED, CONFIRMED, RELEASED
    created_at   TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT uq_voucher_customer UNIQUE (voucher_code, customer_id)
);
`

// solution1Script is the baseline's "Solution 1" (its VoucherService.redeem) as a pgbench
// script: one transaction per reservation, the guarded UPDATE on the voucher's row, then the
// redemption. Every transaction is a new customer and a new order (random 62-bit ids: a repeat
// would abort its client, and the run checks that none did). Solution 1 inserts only when the
// UPDATE took a use; the voucher here never sells out, so it always does.
const solution1Script = `\set customer random(1, 4611686018427387903)
\set order random(1, 4611686018427387903)
BEGIN;
UPDATE voucher SET used_count = used_count + 1
 WHERE code = 'FLASH100'
   AND used_count < total_limit
   AND CURRENT_TIMESTAMP BETWEEN starts_at AND ends_at;
INSERT INTO voucher_redemption(voucher_code, customer_id, order_id, status)
VALUES ('FLASH100', :customer, :order, 'CONFIRMED');
END;
`

// Solution1 runs Solution 1 with pgbench in a database of its own, on a voucher
// of 10,000,000 uses that stays open. Close drops the database.
type Solution1 struct {
	Clients, Threads int
	adminURL, db     string
	url              string
	dir              string
}

// Solution1Result is one pgbench run.
type Solution1Result struct {
	TPS          float64 // pgbench's, without the initial connection time
	Transactions int64
	P50, P99     time.Duration // from pgbench's per-transaction log
	CPU          CPUUse
	Command      string
}

// StartSolution1 creates the database with Solution 1's schema and voucher.
func StartSolution1(ctx context.Context, srv Servers, clients, threads int) (s *Solution1, err error) {
	if _, err := exec.LookPath("pgbench"); err != nil {
		return nil, fmt.Errorf("pgbench is not installed (Debian: apt-get install postgresql-client): %w", err)
	}
	s = &Solution1{Clients: clients, Threads: threads, adminURL: srv.PostgresURL, db: name("vgseed_")}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if s.dir, err = os.MkdirTemp("", "vg-solution1-"); err != nil {
		return s, err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "solution1.sql"), []byte(solution1Script), 0o644); err != nil {
		return s, err
	}
	if s.url, err = createDatabase(ctx, srv.PostgresURL, s.db); err != nil {
		s.db = ""
		return s, err
	}
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return s, fmt.Errorf("connect to %s: %w", s.db, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, seedSchema); err != nil {
		return s, fmt.Errorf("seed schema: %w", err)
	}
	_, err = conn.Exec(ctx, `INSERT INTO voucher(code, discount_amount, total_limit, starts_at, ends_at)
		VALUES ('FLASH100', 100000, 10000000, CURRENT_TIMESTAMP - interval '1 day', CURRENT_TIMESTAMP + interval '1 day')`)
	if err != nil {
		return s, fmt.Errorf("seed voucher: %w", err)
	}
	return s, nil
}

// Run runs pgbench for d (whole seconds) and checks that every transaction took a use.
func (s *Solution1) Run(ctx context.Context, d time.Duration, meter cpuMeter) (Solution1Result, error) {
	before, err := s.usedCount(ctx)
	if err != nil {
		return Solution1Result{}, err
	}
	secs := max(1, int((d+time.Second-1)/time.Second))
	logPrefix := filepath.Join(s.dir, "txlog")
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(s.Clients), "-j", strconv.Itoa(s.Threads),
		"-T", strconv.Itoa(secs), "-f", filepath.Join(s.dir, "solution1.sql"), "-l", "--log-prefix", logPrefix, s.url}
	cmd := exec.CommandContext(ctx, "pgbench", args...)
	start := meter.sample(ctx)
	out, err := cmd.CombinedOutput()
	use := start.until(meter.sample(ctx))
	if err != nil {
		return Solution1Result{}, fmt.Errorf("pgbench: %w\n%s", err, out)
	}
	use.Pgbench = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	use.Generator = 0 // this process only waits for pgbench; what it used is in "other"
	r := Solution1Result{CPU: use, Command: "pgbench " + strings.Join(args[:len(args)-1], " ") + " DB"}
	if r.TPS, err = parseFloat(out, `tps = ([0-9.]+) \(without initial connection time\)`); err != nil {
		return r, err
	}
	tx, err := parseFloat(out, `number of transactions actually processed: ([0-9]+)`)
	if err != nil {
		return r, err
	}
	r.Transactions = int64(tx)
	if failed, err := parseFloat(out, `number of failed transactions: ([0-9]+)`); err == nil && failed > 0 {
		return r, fmt.Errorf("pgbench: %v failed transactions\n%s", failed, out)
	}
	if strings.Contains(string(out), "aborted") {
		return r, fmt.Errorf("pgbench: a client aborted\n%s", out)
	}
	after, err := s.usedCount(ctx)
	if err != nil {
		return r, err
	}
	if after-before != r.Transactions {
		return r, fmt.Errorf("pgbench processed %d transactions but used_count grew by %d", r.Transactions, after-before)
	}
	r.P50, r.P99, err = logQuantiles(logPrefix)
	return r, err
}

func (s *Solution1) usedCount(ctx context.Context) (int64, error) {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return 0, fmt.Errorf("connect to %s: %w", s.db, err)
	}
	defer conn.Close(ctx)
	var used, rows int64
	err = conn.QueryRow(ctx, `SELECT used_count, (SELECT count(*) FROM voucher_redemption) FROM voucher WHERE code = 'FLASH100'`).Scan(&used, &rows)
	if err != nil {
		return 0, fmt.Errorf("read used_count: %w", err)
	}
	if used != rows {
		return 0, fmt.Errorf("used_count %d but %d redemptions", used, rows)
	}
	return used, nil
}

// Close drops the database and removes the script and logs.
func (s *Solution1) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if s.db != "" {
		err = dropDatabase(ctx, s.adminURL, s.db)
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
	return err
}

func parseFloat(out []byte, pattern string) (float64, error) {
	m := regexp.MustCompile(pattern).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("pgbench output has no %q:\n%s", pattern, out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// logQuantiles reads pgbench's per-transaction logs (prefix.PID[.thread]: client, transaction,
// latency in µs, ...), removes them, and returns the latencies' p50 and p99.
func logQuantiles(prefix string) (p50, p99 time.Duration, err error) {
	files, _ := filepath.Glob(prefix + ".*")
	var lat []time.Duration
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return 0, 0, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 {
				continue
			}
			if us, err := strconv.ParseInt(fields[2], 10, 64); err == nil {
				lat = append(lat, time.Duration(us)*time.Microsecond)
			}
		}
		f.Close()
		_ = os.Remove(name)
	}
	if len(lat) == 0 {
		return 0, 0, fmt.Errorf("pgbench wrote no transaction log at %s.*", prefix)
	}
	slices.Sort(lat)
	q := func(x float64) time.Duration { return lat[min(len(lat)-1, int(x*float64(len(lat))))] }
	return q(0.5), q(0.99), nil
}
