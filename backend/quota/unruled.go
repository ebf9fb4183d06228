package quota

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// A deduct or check whose items no rule covers counts nothing and limits nothing: most often a
// business line or identity type typed wrong, which would otherwise go unseen while every
// purchase passes. Such a call is counted by business line, answered with Unruled set (the
// warning NO_QUOTA_RULES), or refused with ErrNoRules when the service is so configured.

// maxUnruledLabels bounds the business lines vouchergate_quota_unruled_total names one by one:
// a bizId is the caller's, and any number may come; past it they count under "other".
const maxUnruledLabels = 100

// unruledCounts counts unruled calls by business line.
type unruledCounts struct {
	vec  *prometheus.CounterVec
	mu   sync.Mutex
	seen map[int64]bool
}

func newUnruledCounts() *unruledCounts {
	return &unruledCounts{seen: map[int64]bool{}, vec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vouchergate_quota_unruled_total",
		Help: "Quota deducts and checks that no rule covers (counting nothing), by business line; past 100 business lines, under \"other\"."},
		[]string{"biz_id"})}
}

func (u *unruledCounts) count(bizID int64) {
	label := "other"
	u.mu.Lock()
	if u.seen[bizID] || len(u.seen) < maxUnruledLabels {
		u.seen[bizID] = true
		label = strconv.FormatInt(bizID, 10)
	}
	u.mu.Unlock()
	u.vec.WithLabelValues(label).Inc()
}

// unruled reports whether no rule covers any of the planned steps, counting it, and refuses the
// call (ErrNoRules) when Config.RefuseUnruled says so.
func (s *Service) unruled(bizID int64, steps []step) (bool, error) {
	for i := range steps {
		if len(steps[i].counters) > 0 {
			return false, nil
		}
	}
	s.metrics.unruledBy.count(bizID)
	if s.cfg.RefuseUnruled {
		return true, ErrNoRules
	}
	return true, nil
}
