package quotaapi_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"vouchergate/backend/quota"
	"vouchergate/backend/quotaapi"
	"vouchergate/migrations"
	"vouchergate/testkit"
)

// newHandlers returns handlers over a quota service on the shared Redis and a fresh, migrated
// database, with a clock stopped at start.
func newHandlers(t testing.TB, start time.Time) (*quotaapi.Handlers, *quota.ManualClock) {
	t.Helper()
	h, clock, _ := newStack(t, start)
	return h, clock
}

// newStack is newHandlers that also returns the service; it uses rdb if given.
func newStack(t testing.TB, start time.Time, rdb ...*redis.Client) (*quotaapi.Handlers, *quota.ManualClock, *quota.Service) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testkit.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	migrate(t, pool)
	if len(rdb) == 0 {
		opts, err := redis.ParseURL(testkit.RedisURL)
		if err != nil {
			t.Fatal(err)
		}
		opts.PoolSize = 128
		rdb = append(rdb, redis.NewClient(opts))
		t.Cleanup(func() { rdb[0].Close() })
	}
	clock := quota.NewManualClock(start)
	prefix := testkit.RedisPrefix(t)
	t.Cleanup(func() { unlinkPrefix(rdb[0], prefix) })
	svc, err := quota.New(ctx, quota.Config{Redis: rdb[0], DB: pool, KeyPrefix: prefix,
		NATSPrefix: testkit.NATSPrefix(), Clock: clock, IdemTTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return quotaapi.New(svc, quotaapi.Options{MaxBodyBytes: 8192}), clock, svc
}

// migrate applies every migration to the database of pool.
func migrate(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
}

// route is the routing the backend's router does for these handlers.
func route(h *quotaapi.Handlers) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		path, method := string(ctx.Path()), string(ctx.Method())
		switch {
		case path == "/quotas/deduct" && method == "POST":
			h.Deduct(ctx)
		case path == "/quotas/rollback" && method == "POST":
			h.Rollback(ctx)
		case path == "/quotas/usage" && method == "GET":
			h.Usage(ctx)
		case path == "/admin/quota-rules" && method == "POST":
			h.PutRule(ctx)
		case path == "/admin/quota-rules" && method == "GET":
			h.ListRules(ctx)
		case strings.HasPrefix(path, "/admin/quota-rules/") && method == "GET":
			h.GetRule(ctx)
		case strings.HasPrefix(path, "/admin/quota-rules/") && method == "DELETE":
			h.DeleteRule(ctx)
		default:
			ctx.SetStatusCode(fasthttp.StatusNotFound)
		}
	}
}

// client serves h on an in-memory listener and returns a client of it.
func client(t testing.TB, h *quotaapi.Handlers) *fasthttp.Client {
	t.Helper()
	ln := fasthttputil.NewInmemoryListener()
	srv := &fasthttp.Server{Handler: route(h), MaxRequestBodySize: 1 << 20}
	go srv.Serve(ln) //nolint:errcheck // ends with Shutdown
	t.Cleanup(func() { _ = srv.Shutdown() })
	return &fasthttp.Client{Dial: func(string) (net.Conn, error) { return ln.Dial() }}
}

// answer is one HTTP answer.
type answer struct {
	status     int
	body       []byte
	retryAfter string
}

func (a answer) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("answer %d %s: %v", a.status, a.body, err)
	}
}

func do(t testing.TB, c *fasthttp.Client, method, uri, body string) answer {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://quota" + uri)
	req.Header.SetMethod(method)
	if body != "" {
		req.Header.SetContentType("application/json")
		req.SetBodyString(body)
	}
	if err := c.DoTimeout(req, resp, 10*time.Second); err != nil {
		t.Fatalf("%s %s: %v", method, uri, err)
	}
	return answer{status: resp.StatusCode(), body: append([]byte(nil), resp.Body()...),
		retryAfter: string(resp.Header.Peek("Retry-After"))}
}

// call runs handler on a request built in memory, without a server.
func call(handler fasthttp.RequestHandler, method, uri, body string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetBodyString(body)
	handler(&ctx)
	return &ctx
}

// unlinkPrefix removes every key under prefix in batches; benchmarks leave hundreds of
// thousands, more than testkit's key-by-key cleanup removes in its time.
func unlinkPrefix(c *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", 5000).Iterator()
	batch := make([]string, 0, 1000)
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == cap(batch) {
			c.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		c.Unlink(ctx, batch...)
	}
}
