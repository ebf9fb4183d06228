package config

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// VG_LOG_FORMAT=json writes one JSON object a line; VG_LOG_LEVEL drops what is below it.
func TestLoggerWritesTheConfiguredFormatFromTheConfiguredLevel(t *testing.T) {
	var buf bytes.Buffer
	log := Log{LogFormat: "json", LogLevel: "warn"}.Logger(&buf)
	log.Info("not written")
	log.Warn("sold out", "code", "FLASH100")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["msg"] != "sold out" || line["code"] != "FLASH100" {
		t.Fatalf("json log %q (%v); want the one warning as JSON", buf.String(), err)
	}

	buf.Reset()
	Log{}.Logger(&buf).Info("warm-up", "code", "FLASH100") // the defaults: text at info
	if got := buf.String(); !strings.Contains(got, "level=INFO msg=warm-up code=FLASH100") {
		t.Fatalf("text log %q; want a logfmt line", got)
	}
}
