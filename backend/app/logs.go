package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"vouchergate/shared/httplog"
)

// The backend's libraries report through its own log, so that under VG_LOG_FORMAT=json every
// line is JSON, and at most once a second for each kind of report with how many were left out
// (dropped=), as the backend's own repeated lines: a Redis or PostgreSQL that is down makes
// every connection attempt fail alike.
//
// go-redis writes to stderr with the standard log package unless given a logger
// (redis.SetLogger, one for the process: the last backend started in it wins). pgx writes no
// log of its own; what it reports to a tracer that would need one is a failed connect, logged
// by the backend's pgx tracer (postgresCalls, calls.go).

// redisLog is go-redis' logger.
type redisLog struct {
	log     *slog.Logger
	sampler *httplog.Sampler // by format
}

func useRedisLog(log *slog.Logger) {
	redis.SetLogger(redisLog{log: log, sampler: httplog.NewSampler(httplog.Every, nil)})
}

func (l redisLog) Printf(_ context.Context, format string, args ...any) {
	dropped, ok := l.sampler.Admit(format)
	if !ok {
		return
	}
	attrs := []any{"from", "go-redis"}
	if dropped > 0 {
		attrs = append(attrs, "dropped", dropped)
	}
	l.log.Warn(strings.TrimPrefix(fmt.Sprintf(format, args...), "redis: "), attrs...)
}

// connectLog logs PostgreSQL connects that failed, at most once a second.
type connectLog struct {
	log     *slog.Logger
	sampler *httplog.Sampler
}

func newConnectLog(log *slog.Logger) connectLog {
	return connectLog{log: log, sampler: httplog.NewSampler(httplog.Every, nil)}
}

func (c connectLog) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return ctx
}

func (c connectLog) TraceConnectEnd(_ context.Context, data pgx.TraceConnectEndData) {
	if data.Err == nil {
		return
	}
	c.sampler.Log(context.Background(), c.log, slog.LevelWarn, "connect", "postgres connect failed", "from", "pgx", "err", data.Err)
}
