// Package httplog is the fasthttp.Logger of both servers (the edge's and the backend's): it
// writes what fasthttp itself reports (a request it could not read, a connection it could not
// serve) through slog, never with the request's bytes, and at most one line per interval for
// each kind of report, with the count of those left out, so that a flood of malformed requests
// cannot flood the log.
//
// fasthttp puts request bytes in its messages: without Server.SecureErrorLogMessage a read
// error quotes the whole buffered request (its Authorization and Cookie headers too), and even
// with it some errors quote the request line or an invalid header's value. So a Logger writes
// only what cannot come from the request: fasthttp's own format, addresses and numbers, and of
// an error the leading words of each error it wraps.
package httplog

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"vouchergate/shared/clock"
)

// Every is the interval the servers give each kind of report: one line a second at most.
const Every = time.Second

// maxKinds bounds the kinds a Logger keeps apart; fasthttp's formats are constants, so more
// would mean a caller passing formats built at run time, which then share one budget.
const maxKinds = 64

// Logger is a fasthttp.Logger writing to a slog.Logger. It is safe for concurrent use.
type Logger struct {
	log   *slog.Logger
	every time.Duration
	clock clock.Clock

	mu    sync.Mutex
	kinds map[string]*kind // by format
}

// kind is the state of one format: when its last line was written and how many were left out
// since.
type kind struct {
	last    time.Time
	dropped int
}

// New returns a Logger writing to log at most one line per interval (every) for each kind of
// report, telling time with c (nil: the wall clock).
func New(log *slog.Logger, every time.Duration, c clock.Clock) *Logger {
	if c == nil {
		c = clock.System{}
	}
	return &Logger{log: log, every: every, clock: c, kinds: make(map[string]*kind)}
}

// Printf writes one warning for fasthttp's report, unless one of the same format was written
// less than an interval ago; then it only counts it.
func (l *Logger) Printf(format string, args ...any) {
	dropped, ok := l.admit(format)
	if !ok {
		return
	}
	safe := make([]any, len(args))
	for i, a := range args {
		safe[i] = redact(a)
	}
	attrs := []any{"from", "fasthttp"}
	if dropped > 0 {
		attrs = append(attrs, "dropped", dropped)
	}
	l.log.Warn(fmt.Sprintf(format, safe...), attrs...)
}

// admit reports whether a line of format may be written now, and how many of its kind were
// left out since the last one written.
func (l *Logger) admit(format string) (int, bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.kinds[format]
	if k == nil {
		if len(l.kinds) >= maxKinds {
			format = "" // the shared budget of formats past the bound
			k = l.kinds[format]
		}
		if k == nil {
			k = &kind{}
			l.kinds[format] = k
			k.last = now
			return 0, true
		}
	}
	if now.Sub(k.last) < l.every {
		k.dropped++
		return 0, false
	}
	dropped := k.dropped
	k.last, k.dropped = now, 0
	return dropped, true
}

// withheld stands for an argument that may hold request bytes.
const withheld = "(withheld)"

// redact returns what of a may be logged: addresses and numbers as they are, the leading words
// of an error (errorWords), and nothing of strings, bytes or anything else, which may be the
// request's.
func redact(a any) any {
	switch v := a.(type) {
	case net.Addr:
		return v.String()
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64, time.Duration:
		return v
	case error:
		return errorWords(v)
	}
	return withheld
}
