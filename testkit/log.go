package testkit

import (
	"bytes"
	"log/slog"
	"sync"
)

// QuietLog is a logger that writes nothing, for the parts a test builds whose warnings (a dead
// server dialled on purpose) would only bury the test's own output.
var QuietLog = slog.New(slog.DiscardHandler)

// CaptureLog returns a logger that writes every level, debug included, as text, and a function
// returning what it has written so far; safe for concurrent use. For tests that check what a
// part logs (and what it must never log, such as a secret).
func CaptureLog() (*slog.Logger, func() string) {
	var mu sync.Mutex
	var buf bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	})
	read := func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})), read
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
