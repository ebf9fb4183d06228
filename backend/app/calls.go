package app

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Every call the backend makes to Redis and PostgreSQL is timed and its failures counted: a
// go-redis hook and a pgx tracer, by command name and by statement kind (the SQL's first word:
// select, insert, update, begin, commit…, so the label stays small).

var callBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// redisCalls is a go-redis hook.
type redisCalls struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

func newRedisCalls(reg prometheus.Registerer) redisCalls {
	c := redisCalls{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vouchergate_redis_command_duration_seconds",
			Help: "Redis commands' time, by command (a pipeline counts once, as pipeline).", Buckets: callBuckets},
			[]string{"command"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vouchergate_redis_command_errors_total",
			Help: "Redis commands that failed (not counting a missing key), by command."}, []string{"command"}),
	}
	reg.MustRegister(c.duration, c.errors)
	return c
}

func (c redisCalls) observe(command string, start time.Time, err error) {
	c.duration.WithLabelValues(command).Observe(time.Since(start).Seconds())
	if failed(err) {
		c.errors.WithLabelValues(command).Inc()
	}
}

// failed reports whether err is a Redis command's failure: not a missing key, and not NOSCRIPT,
// which only says a script is loaded on its first use (after a start or a Redis restart) and is
// sent again at once.
func failed(err error) bool {
	return err != nil && !errors.Is(err, redis.Nil) && !redis.HasErrorPrefix(err, "NOSCRIPT")
}

func (c redisCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c redisCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		c.observe(cmd.Name(), start, err)
		return err
	}
}

func (c redisCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		// err is the first command's error: a NOSCRIPT there must not hide a real failure after it
		failure := err
		if i := slices.IndexFunc(cmds, func(cmd redis.Cmder) bool { return failed(cmd.Err()) }); i >= 0 {
			failure = cmds[i].Err()
		} else if slices.ContainsFunc(cmds, func(cmd redis.Cmder) bool { return cmd.Err() != nil }) {
			failure = nil // only missing keys and NOSCRIPTs
		}
		c.observe("pipeline", start, failure)
		return err
	}
}

// postgresCalls is a pgx query tracer; it logs failed connects too (logs.go).
type postgresCalls struct {
	connectLog
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

func newPostgresCalls(reg prometheus.Registerer, log *slog.Logger) *postgresCalls {
	c := &postgresCalls{connectLog: newConnectLog(log),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vouchergate_postgres_query_duration_seconds",
			Help: "PostgreSQL statements' time, by kind (the SQL's first word).", Buckets: callBuckets},
			[]string{"statement"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vouchergate_postgres_query_errors_total",
			Help: "PostgreSQL statements that failed, by kind (a refusal by a constraint counts too)."}, []string{"statement"}),
	}
	reg.MustRegister(c.duration, c.errors)
	return c
}

type queryStartKey struct{}

type queryStart struct {
	statement string
	at        time.Time
}

func (c *postgresCalls) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, queryStartKey{}, queryStart{statement: statementKind(data.SQL), at: time.Now()})
}

func (c *postgresCalls) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	q, ok := ctx.Value(queryStartKey{}).(queryStart)
	if !ok {
		return
	}
	c.duration.WithLabelValues(q.statement).Observe(time.Since(q.at).Seconds())
	if data.Err != nil && !errors.Is(data.Err, pgx.ErrNoRows) {
		c.errors.WithLabelValues(q.statement).Inc()
	}
}

// statementKind is the SQL's first word in lower case, past comments and space; "other" when
// it is not a plain word.
func statementKind(sql string) string {
	for {
		sql = strings.TrimLeft(sql, " \t\r\n(")
		if !strings.HasPrefix(sql, "--") {
			break
		}
		if i := strings.IndexByte(sql, '\n'); i >= 0 {
			sql = sql[i+1:]
		} else {
			sql = ""
		}
	}
	end := strings.IndexFunc(sql, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') })
	if end < 0 {
		end = len(sql)
	}
	if end == 0 || end > 16 {
		return "other"
	}
	return strings.ToLower(sql[:end])
}
