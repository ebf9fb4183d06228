package backendtest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"vouchergate/testkit"
)

// Snapshot is everything a backend has stored: every row of every table of its database, and
// every Redis key under its prefix with its content and time to live. Two snapshots are equal
// when nothing was written in between.
type Snapshot struct {
	Rows map[string][]string         // table -> its rows as JSON, sorted
	Keys map[string]testkit.RedisKey // key -> what it holds
}

// Snapshot reads both stores. It fails the test if either does not answer.
func (b *Backend) Snapshot(t testing.TB) Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := Snapshot{Rows: map[string][]string{}}
	rows, err := b.App.Pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)
	if err != nil {
		t.Fatalf("snapshot: list tables: %v", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("snapshot: list tables: %v", err)
	}
	for _, table := range tables {
		rows, err := b.App.Pool.Query(ctx, `SELECT row_to_json(t)::text AS j FROM `+pgx.Identifier{table}.Sanitize()+` t ORDER BY j`)
		if err != nil {
			t.Fatalf("snapshot: read %s: %v", table, err)
		}
		if s.Rows[table], err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			t.Fatalf("snapshot: read %s: %v", table, err)
		}
	}
	if s.Keys, err = testkit.RedisKeys(ctx, b.App.Redis, b.Config.RedisPrefix); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return s
}

// Changes lists what differs from before to s: rows, and keys as testkit.RedisChanges says.
func (s Snapshot) Changes(before Snapshot) []string {
	var out []string
	for _, table := range slices.Sorted(maps.Keys(s.Rows)) {
		if !slices.Equal(before.Rows[table], s.Rows[table]) {
			out = append(out, fmt.Sprintf("table %s: %q -> %q", table, before.Rows[table], s.Rows[table]))
		}
	}
	return append(out, testkit.RedisChanges(before.Keys, s.Keys)...)
}
