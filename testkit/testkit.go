// Package testkit isolates tests that share this machine's PostgreSQL, Redis and NATS, and
// starts throwaway servers on free 127.0.0.1 ports for fault tests (redis_server.go,
// postgres_server.go, nats_server.go, redis_cluster.go), and a TCP proxy that cuts a
// PostgreSQL connection once a chosen message has been answered (cutproxy.go). It also holds
// what tests of several packages share: waiting for a condition (wait.go), a clock that moves
// only when told (clock.go), a silent logger (log.go), the Redis benchmarks' baseline and
// cleanup (redis_benchmark.go, unlink.go), requests sent as raw bytes: one exactly as
// written (rawhttp.go) and floods of ones a server cannot read (malformed.go), and a stand-in
// checkout API run as a process of its own for the edge's pass-through (checkout_standin.go,
// with the WebSocket frames of websocket.go).
//
// Each test gets its own database, Redis key prefix and NATS subject prefix, so packages run
// in parallel against one set of servers. The shared servers' addresses come from
// VG_TEST_POSTGRES_URL, VG_TEST_REDIS_URL and VG_TEST_NATS_URL, with this machine's defaults.
package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Shared server addresses.
var (
	PostgresURL = envOr("VG_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	RedisURL    = envOr("VG_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
	NATSURL     = envOr("VG_TEST_NATS_URL", "nats://127.0.0.1:4222")
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Name returns a short random name with the given lead, safe as a database name, a key
// prefix or a subject token.
func Name(lead string) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return lead + hex.EncodeToString(b)
}

// Database creates an empty database on the shared PostgreSQL server (or the one at serverURL,
// if given), drops it when the test ends, and returns its URL.
func Database(t testing.TB, serverURL ...string) string {
	t.Helper()
	admin := PostgresURL
	if len(serverURL) > 0 {
		admin = serverURL[0]
	}
	name := Name("vgt_")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("testkit: connect to PostgreSQL at %s (is it running?): %v", admin, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testkit: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			return // the server may be gone in a fault test; its data dir goes with it
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		t.Fatalf("testkit: parse %s: %v", admin, err)
	}
	return replaceDatabase(admin, cfg.Database, name)
}

func replaceDatabase(url, old, name string) string {
	base, query, _ := strings.Cut(url, "?")
	if old != "" && strings.HasSuffix(base, "/"+old) {
		base = strings.TrimSuffix(base, old) + name
	} else {
		base = strings.TrimSuffix(base, "/") + "/" + name
	}
	if query != "" {
		return base + "?" + query
	}
	return base
}

// RedisPrefix returns a fresh key prefix on the shared Redis and deletes its keys when the
// test ends.
func RedisPrefix(t testing.TB) string {
	t.Helper()
	prefix := Name("t") + ":"
	t.Cleanup(func() {
		opts, err := redis.ParseURL(RedisURL)
		if err != nil {
			return
		}
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	})
	return prefix
}

// Redis returns a client of the shared Redis, closed when the test ends.
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(RedisURL)
	if err != nil {
		t.Fatalf("testkit: VG_TEST_REDIS_URL %q: %v", RedisURL, err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// NATSPrefix returns a fresh subject prefix.
func NATSPrefix() string { return Name("vgt") }
