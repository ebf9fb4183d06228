package httplog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/httplog"
	"vouchergate/testkit"
)

// lines is a log destination a test can read while servers write to it.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *lines) count() int { return strings.Count(l.String(), "\n") }

func newLogger(every time.Duration, c *testkit.ManualClock) (*httplog.Logger, *lines) {
	out := &lines{}
	var cl interface{ Now() time.Time }
	if c != nil {
		cl = c
	}
	return httplog.New(slog.New(slog.NewTextHandler(out, nil)), every, cl), out
}

// One line per interval for each format, the next one counting those left out.
func TestOneLinePerIntervalPerKind(t *testing.T) {
	clock := testkit.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l, out := newLogger(time.Second, clock)
	for i := 0; i < 1000; i++ {
		l.Printf("error when serving connection %q<->%q: %v", nil, nil, errors.New("bad"))
		l.Printf("The number of connections from %s exceeds MaxConnsPerIP=%d", "1.2.3.4", 10)
	}
	if n := out.count(); n != 2 {
		t.Fatalf("2000 reports of 2 kinds within a second wrote %d lines; want 2:\n%s", n, out)
	}
	clock.Advance(999 * time.Millisecond)
	l.Printf("error when serving connection %q<->%q: %v", nil, nil, errors.New("bad"))
	if n := out.count(); n != 2 {
		t.Fatalf("a report 999ms after the last of its kind was written:\n%s", out)
	}
	clock.Advance(time.Millisecond)
	l.Printf("error when serving connection %q<->%q: %v", nil, nil, errors.New("bad"))
	got := out.String()
	if n := out.count(); n != 3 || !strings.Contains(got, "dropped=1000") {
		t.Fatalf("a report a second later: %d lines; want 3, the last with dropped=1000 (999 + 1):\n%s", n, got)
	}
}

type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }

// What may come from a request is never written: strings, bytes, anything but addresses,
// numbers and the leading words of errors.
func TestNeverWritesWhatMayComeFromTheRequest(t *testing.T) {
	l, out := newLogger(0, nil)
	secret := "Bearer SECRET-7f3a"
	inner := fmt.Errorf("invalid header value %q", "Bearer SECRET-7f3a\x01")
	wrapped := fmt.Errorf("error when reading request headers: %w: buffer size=40, contents: %s", inner, "Cookie: sid=SECRET-7f3a")
	l.Printf("error when serving connection %q<->%q: %v", addr("127.0.0.1:1"), addr("127.0.0.1:2"), wrapped)
	l.Printf("%.3f %s - %s", 0.5, "#1 - GET /x?token=SECRET-7f3a", secret)
	l.Printf("raw %s %q %v %x", []byte(secret), secret, struct{ S string }{secret}, []byte(secret))
	l.Printf("%v", errors.New(`"SECRET-7f3a" leads`))
	got := out.String()
	if strings.Contains(got, "SECRET") || strings.Contains(got, "7f3a") || strings.Contains(got, "534543524554") {
		t.Fatalf("the log holds the secret:\n%s", got)
	}
	for _, want := range []string{
		`127.0.0.1:1`, `127.0.0.1:2`,
		"error when reading request headers: invalid header value",
		"0.500", "from=fasthttp", "level=WARN",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %q:\n%s", want, got)
		}
	}
}

// Behind a real fasthttp server with SecureErrorLogMessage, requests fasthttp cannot read
// (each carrying secrets where it stops) are logged, by their kind, and never with their bytes.
func TestRealServerReadErrorsWithoutRequestBytes(t *testing.T) {
	l, out := newLogger(0, nil)
	srv := &fasthttp.Server{
		Handler:               func(ctx *fasthttp.RequestCtx) {},
		Logger:                l,
		SecureErrorLogMessage: true,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { _ = srv.Shutdown() })
	const secret = "SECRET-9c2e"
	malformed := []string{
		"GET /x?token=" + secret + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + secret + "\x01\r\n\r\n",
		"GET /x?token=" + secret + "\r\nAuthorization: Bearer " + secret + "\r\n\r\n",
		"GET /x?token=" + secret + " HTTP/9." + secret + "\r\nCookie: sid=" + secret + "\r\n\r\n",
		"G\x01T / HTTP/1.1\r\nAuthorization: Bearer " + secret + "\r\nCookie: sid=" + secret + "\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " + secret + "\r\nAuthorization: Bearer " + secret + "\r\n\r\n",
	}
	for _, raw := range malformed {
		if status, _ := testkit.RawHTTP(t, ln.Addr().String(), raw); status != 400 {
			t.Errorf("%q: %d; want fasthttp's 400", raw, status)
		}
	}
	testkit.Eventually(t, "a line for each malformed request", func() bool { return out.count() >= len(malformed) })
	got := out.String()
	if strings.Contains(got, "SECRET") || strings.Contains(got, "9c2e") {
		t.Fatalf("the log holds the secret:\n%s", got)
	}
	if !strings.Contains(got, "error when reading request headers") {
		t.Errorf("the log does not say what went wrong:\n%s", got)
	}
}

// A Sampler lets one line of each kind through per interval and counts the rest for the next;
// kinds past its bound share one budget, so kinds made up at run time cannot grow it.
func TestSamplerPerKindAndBounded(t *testing.T) {
	clock := testkit.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := httplog.NewSampler(time.Second, clock)
	admitted := 0
	for i := range 1000 {
		for _, k := range []string{"a", "b"} {
			if _, ok := s.Admit(k); ok {
				admitted++
			}
		}
		if i%2 == 0 {
			clock.Advance(time.Millisecond)
		}
	}
	if admitted != 2 {
		t.Fatalf("2000 lines of 2 kinds within a second: %d let through; want 2", admitted)
	}
	clock.Advance(time.Second)
	if dropped, ok := s.Admit("a"); !ok || dropped != 999 {
		t.Fatalf("a second later: %v, dropped %d; want let through with dropped=999", ok, dropped)
	}
	through := 0
	for i := range 500 {
		if _, ok := s.Admit(fmt.Sprintf("made-up-%d", i)); ok {
			through++
		}
	}
	if through > 64 {
		t.Errorf("500 kinds made up within a second: %d lines let through; want at most the bound, 64", through)
	}
}

// Log writes a line of its kind at most once an interval, the next one with dropped=.
func TestSamplerLog(t *testing.T) {
	clock := testkit.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := httplog.NewSampler(time.Second, clock)
	out := &lines{}
	l := slog.New(slog.NewTextHandler(out, nil))
	for range 10 {
		s.Log(context.Background(), l, slog.LevelWarn, "k", "write failed", "code", "A")
	}
	clock.Advance(time.Second)
	s.Log(context.Background(), l, slog.LevelWarn, "k", "write failed", "code", "A")
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(got) != 2 || strings.Contains(got[0], "dropped") || !strings.Contains(got[1], "code=A dropped=9") || !strings.Contains(got[1], "level=WARN") {
		t.Fatalf("11 lines of one kind over a second: %q; want 2, the second with dropped=9", got)
	}
}
