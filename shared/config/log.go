package config

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Log is how a process writes its log, one line per significant event: VG_LOG_FORMAT text
// (logfmt-like, for people) or json (for a log pipeline), VG_LOG_LEVEL debug, info, warn or error.
type Log struct {
	LogFormat string `env:"VG_LOG_FORMAT" envDefault:"text"`
	LogLevel  string `env:"VG_LOG_LEVEL" envDefault:"info"`
}

// Check reports a format or level that is not one of the known ones; empty is the default.
func (l Log) Check() error {
	if l.LogFormat != "" && l.LogFormat != "text" && l.LogFormat != "json" {
		return fmt.Errorf("VG_LOG_FORMAT is %q; expected text or json", l.LogFormat)
	}
	if _, err := l.level(); err != nil {
		return err
	}
	return nil
}

func (l Log) level() (slog.Level, error) {
	var lv slog.Level
	if l.LogLevel == "" {
		return slog.LevelInfo, nil
	}
	if err := lv.UnmarshalText([]byte(strings.ToUpper(l.LogLevel))); err != nil {
		return 0, fmt.Errorf("VG_LOG_LEVEL is %q; expected debug, info, warn or error", l.LogLevel)
	}
	return lv, nil
}

// Logger returns a logger writing to w in the configured format from the configured level.
// Settings that do not pass Check give text at info.
func (l Log) Logger(w io.Writer) *slog.Logger {
	lv, _ := l.level()
	opts := &slog.HandlerOptions{Level: lv}
	if l.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
