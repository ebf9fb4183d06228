// Package httplog is the fasthttp.Logger of both servers (the edge's and the backend's): it
// writes what fasthttp itself reports (a request it could not read, a connection it could not
// serve) through slog, never with the request's bytes, and at most one line per interval for
// each kind of report, with the count of those left out, so that a flood of malformed requests
// cannot flood the log. Its Sampler keeps other repeated lines to the same budget (the
// backend's failed requests, its libraries' reports).
//
// fasthttp puts request bytes in its messages: without Server.SecureErrorLogMessage a read
// error quotes the whole buffered request (its Authorization and Cookie headers too), and even
// with it some errors quote the request line or an invalid header's value. So a Logger writes
// only what cannot come from the request: fasthttp's own format, addresses and numbers, and of
// an error the leading words of each error it wraps.
package httplog

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"vouchergate/shared/clock"
)

// Every is the interval the servers give each kind of report: one line a second at most.
const Every = time.Second

// maxKinds bounds the kinds a Sampler keeps apart; fasthttp's formats are constants, so more
// would mean a caller passing formats built at run time, which then share one budget.
const maxKinds = 64

// Logger is a fasthttp.Logger writing to a slog.Logger. It is safe for concurrent use.
type Logger struct {
	log     *slog.Logger
	sampler *Sampler // by format
}

// New returns a Logger writing to log at most one line per interval (every) for each kind of
// report, telling time with c (nil: the wall clock).
func New(log *slog.Logger, every time.Duration, c clock.Clock) *Logger {
	return &Logger{log: log, sampler: NewSampler(every, c)}
}

// Printf writes one warning for fasthttp's report, unless one of the same format was written
// less than an interval ago; then it only counts it.
func (l *Logger) Printf(format string, args ...any) {
	dropped, ok := l.sampler.Admit(format)
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

// Sampler lets at most one line per interval through for each kind of line, and counts those
// it holds back, so that a line repeated thousands of times a second (a failure every request
// meets) is written once a second with how many were left out. It is safe for concurrent use.
type Sampler struct {
	every time.Duration
	clock clock.Clock

	mu    sync.Mutex
	kinds map[string]*kind
}

// kind is the state of one kind of line: when its last line was written and how many were
// left out since.
type kind struct {
	last    time.Time
	dropped int
}

// NewSampler returns a Sampler letting one line of each kind through per interval (every),
// telling time with c (nil: the wall clock).
func NewSampler(every time.Duration, c clock.Clock) *Sampler {
	if c == nil {
		c = clock.System{}
	}
	return &Sampler{every: every, clock: c, kinds: make(map[string]*kind)}
}

// Admit reports whether a line of kind may be written now and, when it may, how many lines of
// its kind were left out since the last one written: the line's dropped=. Past maxKinds kinds,
// new ones share one budget.
func (s *Sampler) Admit(kindName string) (dropped int, ok bool) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.kinds[kindName]
	if k == nil {
		if len(s.kinds) >= maxKinds {
			kindName = "" // the shared budget of kinds past the bound
			k = s.kinds[kindName]
		}
		if k == nil {
			k = &kind{}
			s.kinds[kindName] = k
			k.last = now
			return 0, true
		}
	}
	if now.Sub(k.last) < s.every {
		k.dropped++
		return 0, false
	}
	dropped = k.dropped
	k.last, k.dropped = now, 0
	return dropped, true
}

// Log writes msg at level to l, unless a line of kind was written less than an interval ago
// (Admit): the line then carries dropped=, how many of its kind were left out since.
func (s *Sampler) Log(ctx context.Context, l *slog.Logger, level slog.Level, kind, msg string, args ...any) {
	dropped, ok := s.Admit(kind)
	if !ok {
		return
	}
	if dropped > 0 {
		args = append(args, "dropped", dropped)
	}
	l.Log(ctx, level, msg, args...)
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
