package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Failed PostgreSQL connects reach the backend's log through the pgx tracer, as the log's
// format writes them, at most once a second.
func TestFailedConnectsAreLoggedOnceASecond(t *testing.T) {
	var out bytes.Buffer
	c := newConnectLog(slog.New(slog.NewJSONHandler(&out, nil)))
	for range 1000 {
		c.TraceConnectEnd(t.Context(), pgx.TraceConnectEndData{Err: errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")})
	}
	c.TraceConnectEnd(t.Context(), pgx.TraceConnectEndData{}) // a connect that worked: nothing to say
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var rec map[string]any
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &rec) != nil || rec["msg"] != "postgres connect failed" || rec["from"] != "pgx" {
		t.Fatalf("1000 failed connects within a second logged:\n%s\nwant one JSON line from pgx", out.String())
	}
}
