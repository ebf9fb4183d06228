package quota

import (
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
}

type metrics struct {
	deducts, taken, replayed, exceeded, rolledBack, reused atomic.Uint64
	rollbacks, givenBack, unavailable, undoFailed          atomic.Uint64
	ruleLoads, ruleErrors, rules                           atomic.Uint64
}

// Metrics returns the counts so far.
func (s *Service) Metrics() Metrics {
	c := &s.metrics
	return Metrics{
		Deducts: c.deducts.Load(), Taken: c.taken.Load(), Replayed: c.replayed.Load(),
		Exceeded: c.exceeded.Load(), RolledBack: c.rolledBack.Load(), Reused: c.reused.Load(),
		Rollbacks: c.rollbacks.Load(), GivenBack: c.givenBack.Load(), Unavailable: c.unavailable.Load(),
		UndoFailed: c.undoFailed.Load(), RuleLoads: c.ruleLoads.Load(), RuleErrors: c.ruleErrors.Load(),
		Rules: c.rules.Load(),
	}
}

// collectors are the counts as Prometheus metrics, read when scraped: the service's calls
// only add to an atomic, and Service.Metrics and /metrics read the same numbers.
func (c *metrics) collectors() []prometheus.Collector {
	counter := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v.Load()) })
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
	}
}
