package app_test

import (
	"context"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3/lock"

	"vouchergate/backend/app"
	"vouchergate/backend/backendtest"
	"vouchergate/backend/store"
	"vouchergate/migrations"
	"vouchergate/testkit"
)

// Two backends starting at once on a fresh database both start: goose's session lock lets
// one apply the migrations while the other waits, and the other then finds nothing left to
// do. The test holds that lock itself until both backends are waiting for it, so they
// certainly migrate at the same time. Each migration is then recorded once, and the schema is
// the one a lone backend makes.
func TestTwoBackendsMigrateAFreshDatabaseAtOnce(t *testing.T) {
	cfg := backendtest.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lock.DefaultLockID); err != nil {
		t.Fatal(err)
	}

	type started struct {
		a   *app.App
		err error
	}
	results := make(chan started, 2)
	for range 2 {
		go func() {
			a, err := app.New(ctx, cfg)
			results <- started{a, err}
		}()
	}
	testkit.Eventually(t, "both backends waiting for the migration lock", func() bool {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND pid <> pg_backend_pid() AND query LIKE '%pg_try_advisory_lock%'`).Scan(&n)
		return err == nil && n == 2
	})
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, lock.DefaultLockID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Errorf("a backend started at the same time as another: %v", r.err)
			continue
		}
		t.Cleanup(func() { r.a.Close() })
	}
	if t.Failed() {
		return
	}

	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded migrations: %v %v", files, err)
	}
	var versions []int64
	rows, err := conn.Query(ctx, `SELECT version_id FROM goose_db_version WHERE version_id > 0 AND is_applied ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	if versions, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		t.Fatal(err)
	}
	want := make([]int64, len(files)) // each file's number: numbers are taken per branch, so some may be missing
	for i, f := range files {
		num, _, _ := strings.Cut(f, "_")
		if want[i], err = strconv.ParseInt(num, 10, 64); err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
	}
	if !slices.Equal(versions, want) {
		t.Errorf("migrations recorded as applied: %v; want each of %v once, in order", versions, want)
	}

	lone := loneSchema(t, ctx)
	if got := schema(t, ctx, conn); !slices.Equal(got, lone) {
		t.Errorf("schema made by two backends at once differs from a lone backend's:\n%s",
			diff(got, lone))
	}
}

// loneSchema migrates a fresh database as one backend does and returns its schema.
func loneSchema(t *testing.T, ctx context.Context) []string {
	t.Helper()
	url := testkit.Database(t)
	pool, err := store.Open(ctx, url, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	return schema(t, ctx, conn)
}

// schema lists the public schema's tables' columns, constraints, indexes, triggers and
// functions, one line each, sorted.
func schema(t *testing.T, ctx context.Context, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(ctx, `
		SELECT format('column %s.%s %s null=%s default=%s', table_name, column_name, data_type, is_nullable, column_default)
			FROM information_schema.columns WHERE table_schema = 'public'
		UNION ALL SELECT format('constraint %s %s %s', conrelid::regclass, conname, pg_get_constraintdef(oid))
			FROM pg_constraint WHERE connamespace = 'public'::regnamespace
		UNION ALL SELECT format('index %s', indexdef) FROM pg_indexes WHERE schemaname = 'public'
		UNION ALL SELECT format('trigger %s', pg_get_triggerdef(oid)) FROM pg_trigger WHERE NOT tgisinternal
		UNION ALL SELECT format('function %s %s', proname, md5(prosrc)) FROM pg_proc WHERE pronamespace = 'public'::regnamespace
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 {
		t.Fatal("empty schema")
	}
	return lines
}

// diff lists the lines only one of a and b has.
func diff(a, b []string) string {
	var out string
	for _, l := range a {
		if !slices.Contains(b, l) {
			out += "+ " + l + "\n"
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			out += "- " + l + "\n"
		}
	}
	return out
}
