package quota

import (
	"context"
	"log/slog"

	"vouchergate/shared/httplog"
)

// newLogSampler returns the sampler of the lines a Redis outage repeats for every request it
// meets, by kind and business line (warnSampled).
func newLogSampler(cfg Config) *httplog.Sampler { return httplog.NewSampler(httplog.Every, cfg.Clock) }

// warnSampled writes a warning of kind (a degraded answer, a step not given back, with the
// business line) at most once a second, the later ones with dropped= counting those left out
// since: at a sale's rate, one line per deduct would flood the log that should show the outage.
// The API's failed requests are sampled the same way.
func (s *Service) warnSampled(kind, msg string, args ...any) {
	s.logs.Log(context.Background(), s.cfg.Log, slog.LevelWarn, kind, msg, args...)
}
