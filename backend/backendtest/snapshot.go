package backendtest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Snapshot is everything a backend has stored: every row of every table of its database, and
// every Redis key under its prefix with its value (DUMP) and time to live. Two snapshots are
// equal when nothing was written in between.
type Snapshot struct {
	Rows map[string][]string  // table -> its rows as JSON, sorted
	Keys map[string]RedisItem // key -> what it holds
}

// RedisItem is one key: its serialized value and its time to live (-1: none).
type RedisItem struct {
	Dump string
	TTL  time.Duration
}

// Snapshot reads both stores. It fails the test if either does not answer.
func (b *Backend) Snapshot(t testing.TB) Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := Snapshot{Rows: map[string][]string{}, Keys: map[string]RedisItem{}}
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
	iter := b.App.Redis.Scan(ctx, 0, b.Config.RedisPrefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		dump, err := b.App.Redis.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("snapshot: dump %s: %v", k, err)
		}
		ttl, err := b.App.Redis.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatalf("snapshot: ttl of %s: %v", k, err)
		}
		s.Keys[k] = RedisItem{Dump: dump, TTL: ttl}
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("snapshot: scan keys: %v", err)
	}
	return s
}

// Changes lists what differs from before to s: rows and keys added, removed or changed, and a
// time to live set, cleared or moved later (one only counting down is no change).
func (s Snapshot) Changes(before Snapshot) []string {
	var out []string
	for _, table := range slices.Sorted(maps.Keys(s.Rows)) {
		if !slices.Equal(before.Rows[table], s.Rows[table]) {
			out = append(out, fmt.Sprintf("table %s: %q -> %q", table, before.Rows[table], s.Rows[table]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(before.Keys)) {
		if _, ok := s.Keys[k]; !ok {
			out = append(out, "key "+k+" removed")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Keys)) {
		was, ok := before.Keys[k]
		now := s.Keys[k]
		switch {
		case !ok:
			out = append(out, "key "+k+" added")
		case was.Dump != now.Dump:
			out = append(out, "key "+k+" changed")
		case (was.TTL < 0) != (now.TTL < 0) || now.TTL > was.TTL:
			out = append(out, fmt.Sprintf("key %s: time to live %v -> %v", k, was.TTL, now.TTL))
		}
	}
	return out
}
