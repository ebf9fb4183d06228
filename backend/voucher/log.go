package voucher

import (
	"context"
	"log/slog"
)

// logRepeated writes a line that every request meeting one failure writes alike (a flash
// winner's write failing during a PostgreSQL outage, its compensation failing during a Redis
// outage) at most once a second for each message, with how many were left out since (dropped=),
// as the API's "request failed" line is: the metrics count each one.
func (s *Service) logRepeated(level slog.Level, msg string, attrs ...any) {
	s.repeated.Log(context.Background(), s.cfg.Log, level, msg, msg, attrs...)
}
