// Package flashbench measures the backend's flash path as a whole process on this machine,
// each figure beside its baseline in the same run: reservations that all win against the
// baseline's "Solution 1" run by pgbench (allwin.go), and a flash sale of new customers selling
// out (sale.go). It starts the backend command against a database created for the run, with
// its own Redis key prefix and NATS subject prefix, and removes all three afterwards.
package flashbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"vouchergate/shared/events"
)

// Servers are the shared servers the backend and the baselines use, all on 127.0.0.1.
type Servers struct {
	PostgresURL string // a database to connect to for CREATE DATABASE, such as .../postgres
	RedisURL    string
	NATSURL     string
}

// DefaultServers are this machine's: what `make services` starts.
var DefaultServers = Servers{
	PostgresURL: "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
	RedisURL:    "redis://127.0.0.1:6379/0",
	NATSURL:     "nats://127.0.0.1:4222",
}

// Backend is a backend command started for a benchmark. Close stops it and removes its data.
type Backend struct {
	Addr  string // 127.0.0.1:port
	Token string // the admin token
	process

	servers    Servers
	db         string // its database
	redisPfx   string
	natsPfx    string
	http       *http.Client // the admin API's
	redis      *redis.Client
	closedOnce bool
}

// name returns lead followed by random hex, safe as a database name, key prefix and subject token.
func name(lead string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return lead + hex.EncodeToString(b)
}

// StartBackend builds the backend command (unless binary names one), creates a database for
// it, starts it on a free 127.0.0.1 port and waits until /healthz answers. The backend's
// periodic jobs are off, so that only reservations are measured; everything else is the
// default of configs/backend.yaml and env's settings (VG_NAME=value, GOGC=…; the run's own
// addresses and names win over them).
func StartBackend(ctx context.Context, srv Servers, binary string, env ...string) (b *Backend, err error) {
	b = &Backend{servers: srv, Token: name("bench-"), redisPfx: name("vgbench") + ":", natsPfx: name("vgbench"),
		http: &http.Client{Timeout: 30 * time.Second}}
	defer func() {
		if err != nil {
			_ = b.Close()
		}
	}()
	if binary, err = b.prepare(ctx, "backend", binary); err != nil {
		return b, err
	}
	opts, err := redis.ParseURL(srv.RedisURL)
	if err != nil {
		return b, fmt.Errorf("redis URL %s: %w", srv.RedisURL, err)
	}
	b.redis = redis.NewClient(opts)
	b.db = name("vgbench_")
	dbURL, err := createDatabase(ctx, srv.PostgresURL, b.db)
	if err != nil {
		return b, err
	}
	if b.Addr, err = freeAddr(); err != nil {
		return b, err
	}
	if err = b.start(binary, append(slices.Clip(env),
		"VG_BACKEND_ADDR="+b.Addr, "VG_BACKEND_OPS_ADDR=off", "VG_DATABASE_URL="+dbURL, "VG_REDIS_URL="+srv.RedisURL,
		"VG_REDIS_PREFIX="+b.redisPfx, "VG_NATS_URL="+srv.NATSURL, "VG_NATS_PREFIX="+b.natsPfx,
		"VG_ADMIN_TOKEN="+b.Token, "VG_EXPIRE_EVERY=0", "VG_RECONCILE_EVERY=0", "VG_WARMUP_EVERY=0")...); err != nil {
		return b, err
	}
	return b, b.waitReady(ctx, "http://"+b.Addr+"/healthz", 30*time.Second)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// LogSummary counts the warnings and errors the backend logged and quotes the first of each
// distinct message (up to a few), or says there were none.
func (b *Backend) LogSummary() string {
	out, _ := os.ReadFile(b.logPath())
	counts := map[string]int{}
	var order []string
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, "level=WARN") && !strings.Contains(line, "level=ERROR") {
			continue
		}
		msg := line
		if _, after, ok := strings.Cut(line, " msg="); ok {
			msg = after
			if i := strings.Index(msg, " code="); i > 0 {
				msg = msg[:i]
			}
		}
		if counts[msg]++; counts[msg] == 1 {
			order = append(order, msg)
		}
	}
	if len(order) == 0 {
		return "backend log: no warnings or errors"
	}
	var b2 strings.Builder
	b2.WriteString("backend log:")
	for i, msg := range order {
		if i == 5 {
			fmt.Fprintf(&b2, " and %d more kinds", len(order)-5)
			break
		}
		fmt.Fprintf(&b2, " %d× %s;", counts[msg], msg)
	}
	return b2.String()
}

// Close stops the backend (SIGTERM to its PID, SIGKILL after 10 s), then drops its database
// and removes its Redis keys, its NATS bucket and its files.
func (b *Backend) Close() error {
	if b.closedOnce {
		return nil
	}
	b.closedOnce = true
	var errs []error
	b.stop(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if b.db != "" {
		errs = append(errs, dropDatabase(ctx, b.servers.PostgresURL, b.db))
	}
	if b.redis != nil {
		errs = append(errs, deleteKeys(ctx, b.redis, b.redisPfx))
		_ = b.redis.Close()
	}
	if b.natsPfx != "" {
		deleteBucket(ctx, b.servers.NATSURL, events.Names{Prefix: b.natsPfx}.StateBucket())
	}
	errs = append(errs, b.removeFiles())
	return errors.Join(errs...)
}

// deleteKeys removes every key under prefix.
func deleteKeys(ctx context.Context, rdb *redis.Client, prefix string) error {
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 500 {
			if err := rdb.Unlink(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		if err := rdb.Unlink(ctx, batch...).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}

func deleteBucket(ctx context.Context, url, bucket string) {
	nc, err := nats.Connect(url, nats.Timeout(time.Second))
	if err != nil {
		return
	}
	defer nc.Close()
	if js, err := jetstream.New(nc); err == nil {
		_ = js.DeleteKeyValue(ctx, bucket)
	}
}
