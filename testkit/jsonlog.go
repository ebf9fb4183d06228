package testkit

import (
	"encoding/json"
	"strings"
	"testing"
)

// LogRecord is what a test counts of one line of a process's JSON log (VG_LOG_FORMAT=json).
type LogRecord struct {
	Level   string `json:"level"`
	Msg     string `json:"msg"`
	Dropped int    `json:"dropped"` // lines of its kind left out before it
}

// JSONLog reads output, a process's log, as one JSON log record a line, and fails t for each
// line that is not one (naming the first three).
func JSONLog(t testing.TB, output string) []LogRecord {
	t.Helper()
	var records []LogRecord
	notJSON := 0
	for _, line := range strings.Split(strings.TrimSpace(output), "\n") {
		var rec LogRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Level == "" || rec.Msg == "" {
			if notJSON++; notJSON <= 3 {
				t.Errorf("a line that is not a JSON log record (%v): %s", err, line)
			}
			continue
		}
		records = append(records, rec)
	}
	if notJSON > 3 {
		t.Errorf("... and %d more lines that are not JSON", notJSON-3)
	}
	return records
}

// Tail is the last n bytes of s, marked as cut when s is longer: what a failing test shows of
// a long log.
func Tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
