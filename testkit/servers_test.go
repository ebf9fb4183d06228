package testkit

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// requireDown fails the test if anything accepts connections on addr.
func requireDown(t *testing.T, addr string) {
	t.Helper()
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections", addr)
	}
}

func newRedisClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func TestRedisComesBackEmptyWithoutPersistence(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	srv := StartRedis(t)
	addr := srv.Addr()
	if want := "redis://" + addr + "/0"; srv.URL() != want {
		t.Fatalf("URL() = %q, want %q", srv.URL(), want)
	}
	rdb := newRedisClient(t, srv.URL())
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	srv.Kill()
	if srv.Running() {
		t.Fatal("Running() after Kill")
	}
	requireDown(t, addr)
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered after Kill")
	}

	srv.Start()
	if srv.Addr() != addr {
		t.Fatalf("restarted on %s, want %s", srv.Addr(), addr)
	}
	if err := rdb.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after restart without persistence = %v, want redis.Nil", err)
	}
}

func TestRedisPersistentKeepsDataUntilRestartEmpty(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	srv := StartRedis(t, RedisPersistent())
	rdb := newRedisClient(t, srv.URL())
	if err := rdb.Set(ctx, "k", "v1", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	srv.Kill()
	requireDown(t, srv.Addr())
	srv.Start()
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v1" {
		t.Fatalf("GET after Kill and Start = %q, %v; want v1", got, err)
	}

	if err := rdb.Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	srv.Stop()
	requireDown(t, srv.Addr())
	srv.Start()
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v2" {
		t.Fatalf("GET after Stop and Start = %q, %v; want v2", got, err)
	}

	srv.RestartEmpty()
	if err := rdb.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after RestartEmpty = %v, want redis.Nil", err)
	}
	n, err := rdb.DBSize(ctx).Result()
	if err != nil || n != 0 {
		t.Fatalf("DBSIZE after RestartEmpty = %d, %v; want 0", n, err)
	}
}

func TestPostgresKeepsCommittedRowsAcrossKillAndStop(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	srv := StartPostgres(t)
	dbURL := Database(t, srv.URL())
	exec := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	count := func() int {
		t.Helper()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatalf("count: %v", err)
		}
		return n
	}
	exec("CREATE TABLE t (id int PRIMARY KEY)")
	exec("INSERT INTO t VALUES (1)")

	// An open session when the postmaster dies, as a backend's pool would have.
	held, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer held.Close(context.Background())

	srv.Kill()
	if srv.Running() {
		t.Fatal("Running() after Kill")
	}
	requireDown(t, srv.Addr())
	if err := held.Ping(ctx); err == nil {
		t.Fatal("a session survived Kill")
	}
	srv.Start()
	if n := count(); n != 1 {
		t.Fatalf("%d rows after Kill and Start, want 1", n)
	}

	exec("INSERT INTO t VALUES (2)")
	srv.Stop()
	requireDown(t, srv.Addr())
	srv.Start()
	if n := count(); n != 2 {
		t.Fatalf("%d rows after Stop and Start, want 2", n)
	}
}

func TestNATSKeepsStreamsAcrossStopAndKill(t *testing.T) {
	t.Parallel()
	srv := StartNATS(t)
	if want := "nats://" + srv.Addr(); srv.URL() != want {
		t.Fatalf("URL() = %q, want %q", srv.URL(), want)
	}
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatalf("JetStream: %v", err)
	}
	if _, err := js.AddStream(&nats.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"}}); err != nil {
		t.Fatalf("add stream: %v", err)
	}
	if _, err := js.Publish("events.sold_out", []byte("FLASH")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	messages := func() uint64 {
		t.Helper()
		info, err := js.StreamInfo("EVENTS", nats.MaxWait(10*time.Second))
		if err != nil {
			t.Fatalf("stream info: %v", err)
		}
		return info.State.Msgs
	}

	// Stop flushes the store, so the published message must be there after Start.
	srv.Stop()
	requireDown(t, srv.Addr())
	srv.Start()
	if n := messages(); n != 1 {
		t.Fatalf("%d messages after Stop and Start, want 1", n)
	}

	srv.Kill()
	if srv.Running() {
		t.Fatal("Running() after Kill")
	}
	requireDown(t, srv.Addr())
	if err := nc.Publish("plain", nil); err == nil {
		if err := nc.FlushTimeout(200 * time.Millisecond); err == nil {
			t.Fatal("a flush reached the killed server")
		}
	}
	srv.Start()
	// The same client reconnects by itself; core and JetStream answer again.
	sub, err := nc.SubscribeSync("ping")
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := nc.Publish("ping", []byte("1")); err != nil {
		t.Fatalf("publish after restart: %v", err)
	}
	if _, err := sub.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no message after restart: %v", err)
	}
	if n := messages(); n != 1 {
		t.Fatalf("%d messages after Kill and Start, want 1", n)
	}
}
