package quota

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count what the service did since it started, for alerts (a jump in Unavailable or
// UndoFailed, a deduct refusal rate that moves). Read them with Service.Metrics; the backend's
// /metrics exports them (Config.Metrics).
type Metrics struct {
	Deducts     uint64 // deduct calls that passed validation
	Taken       uint64 // deducts answered with counters (first answers and replays)
	Replayed    uint64 // of Taken: identity steps answered from an earlier attempt's record
	Exceeded    uint64 // deducts refused: a counter had no room
	RolledBack  uint64 // deducts refused: the idemKey was rolled back
	Reused      uint64 // deducts refused: the idemKey took with other items
	Rollbacks   uint64 // rollback calls that passed validation
	GivenBack   uint64 // amounts rollbacks returned, summed over counters
	Unavailable uint64 // deduct, rollback and usage calls that ended with ErrUnavailable
	UndoFailed  uint64 // steps a refused deduct held but could not give back (they stay until retried or rolled back)
	RuleLoads   uint64 // successful loads of every rule
	RuleErrors  uint64 // failed loads (the rules held stay in use)
	Rules       uint64 // rules held now
	Degraded    uint64 // deducts and checks answered degraded (Redis unreachable, business line OPEN)
	WouldExceed uint64 // SHADOW rules' would-be refusals of deducts that passed, all rules summed
	Resets      uint64 // counter resets that reached Redis
	MayEvict    bool   // at the last look, a Redis master's maxmemory-policy could evict quota keys
	// EvictionUnknown: at the last look, a Redis master would not tell its maxmemory-policy
	// (CONFIG disabled) and none was known to evict
	EvictionUnknown bool
}

type metrics struct {
	deducts, taken, replayed, exceeded, rolledBack, reused atomic.Uint64
	rollbacks, givenBack, unavailable, undoFailed          atomic.Uint64
	ruleLoads, ruleErrors, rules                           atomic.Uint64
	degraded, shadowed, resets                             atomic.Uint64
	mayEvict, evictionUnknown                              atomic.Bool

	// by business line and by rule; created by newMetrics
	degradedBy, shadowedBy *prometheus.CounterVec
	unruledBy              *unruledCounts
}

func newMetrics() metrics {
	return metrics{
		unruledBy: newUnruledCounts(),
		degradedBy: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vouchergate_quota_degraded_total",
			Help: "Quota deducts and checks answered degraded (counting nothing) because Redis could not be reached and their business line is set to whenUnavailable OPEN."},
			[]string{"biz_id"}),
		shadowedBy: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vouchergate_quota_shadow_would_exceed_total",
			Help: "Deducts that passed but that a SHADOW rule would have refused, by rule (first answers, not replays)."},
			[]string{"rule_id"}),
	}
}

// wouldExceed counts a SHADOW rule's would-be refusal.
func (c *metrics) wouldExceed(rule int64) {
	c.shadowed.Add(1)
	if c.shadowedBy != nil {
		c.shadowedBy.WithLabelValues(strconv.FormatInt(rule, 10)).Inc()
	}
}

// degradedAnswer counts a degraded answer of bizID.
func (c *metrics) degradedAnswer(bizID int64) {
	c.degraded.Add(1)
	if c.degradedBy != nil {
		c.degradedBy.WithLabelValues(strconv.FormatInt(bizID, 10)).Inc()
	}
}

// openLine shows bizID's series of degraded answers at 0 as soon as its business line is set
// OPEN: a series that appears only with its first answers starts at its first value, whose jump
// increase() cannot see, so an alert on it would miss a short outage and be late for a long one.
func (c *metrics) openLine(bizID int64) {
	if c.degradedBy != nil {
		c.degradedBy.WithLabelValues(strconv.FormatInt(bizID, 10)).Add(0)
	}
}

// Metrics returns the counts so far.
func (s *Service) Metrics() Metrics {
	c := &s.metrics
	return Metrics{
		Deducts: c.deducts.Load(), Taken: c.taken.Load(), Replayed: c.replayed.Load(),
		Exceeded: c.exceeded.Load(), RolledBack: c.rolledBack.Load(), Reused: c.reused.Load(),
		Rollbacks: c.rollbacks.Load(), GivenBack: c.givenBack.Load(), Unavailable: c.unavailable.Load(),
		UndoFailed: c.undoFailed.Load(), RuleLoads: c.ruleLoads.Load(), RuleErrors: c.ruleErrors.Load(),
		Rules: c.rules.Load(), Degraded: c.degraded.Load(), WouldExceed: c.shadowed.Load(), Resets: c.resets.Load(),
		MayEvict: c.mayEvict.Load(), EvictionUnknown: c.evictionUnknown.Load(),
	}
}

// collectors are the counts as Prometheus metrics, read when scraped: the service's calls
// only add to an atomic, and Service.Metrics and /metrics read the same numbers.
func (c *metrics) collectors() []prometheus.Collector {
	counter := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v.Load()) })
	}
	flag := func(name, help string, v *atomic.Bool) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			if v.Load() {
				return 1
			}
			return 0
		})
	}
	return []prometheus.Collector{
		counter("vouchergate_quota_deducts_total", "Quota deduct calls that passed validation.", &c.deducts),
		counter("vouchergate_quota_deducts_taken_total", "Quota deducts answered with counters (first answers and replays).", &c.taken),
		counter("vouchergate_quota_steps_replayed_total", "Identity steps of a deduct answered from an earlier attempt's record.", &c.replayed),
		counter("vouchergate_quota_deducts_exceeded_total", "Quota deducts refused because a counter had no room.", &c.exceeded),
		counter("vouchergate_quota_deducts_rolled_back_total", "Quota deducts refused because their idemKey was rolled back.", &c.rolledBack),
		counter("vouchergate_quota_deducts_key_reused_total", "Quota deducts refused because their idemKey took other items.", &c.reused),
		counter("vouchergate_quota_rollbacks_total", "Quota rollback calls that passed validation.", &c.rollbacks),
		counter("vouchergate_quota_given_back_total", "Amounts quota rollbacks returned, summed over counters.", &c.givenBack),
		counter("vouchergate_quota_unavailable_total", "Quota deduct, rollback and usage calls that failed because Redis could not be used.", &c.unavailable),
		counter("vouchergate_quota_undo_failed_total", "Steps a refused deduct held but could not give back; they stay until retried or rolled back.", &c.undoFailed),
		counter("vouchergate_quota_rule_loads_total", "Successful loads of every quota rule.", &c.ruleLoads),
		counter("vouchergate_quota_rule_load_errors_total", "Failed loads of the quota rules; the rules held stay in use.", &c.ruleErrors),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vouchergate_quota_rules", Help: "Quota rules held now."},
			func() float64 { return float64(c.rules.Load()) }),
		counter("vouchergate_quota_resets_total", "Resets of an identity's quota counters that reached Redis.", &c.resets),
		flag("vouchergate_quota_redis_may_evict",
			"1 when, at the last look (start, /readyz, every VG_QUOTA_REFRESH_EVERY), a Redis master's maxmemory-policy could evict quota keys; 0 with noeviction.",
			&c.mayEvict),
		flag("vouchergate_quota_redis_eviction_unknown",
			"1 when, at the last look, a Redis master would not tell its maxmemory-policy (CONFIG renamed or disabled, as on managed Redis) and none was known to evict: check the policy with the provider.",
			&c.evictionUnknown),
		c.degradedBy, c.shadowedBy, c.unruledBy.vec,
	}
}
