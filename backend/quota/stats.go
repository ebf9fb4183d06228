package quota

import "sync/atomic"

// Stats counts what the service did since it started, for /metrics and alerts (a jump in
// Unavailable or UndoFailed, a deduct refusal rate that moves). Read it with Service.Stats.
type Stats struct {
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

type stats struct {
	deducts, taken, replayed, exceeded, rolledBack, reused atomic.Uint64
	rollbacks, givenBack, unavailable, undoFailed          atomic.Uint64
	ruleLoads, ruleErrors, rules                           atomic.Uint64
}

// Stats returns the counts so far.
func (s *Service) Stats() Stats {
	c := &s.stats
	return Stats{
		Deducts: c.deducts.Load(), Taken: c.taken.Load(), Replayed: c.replayed.Load(),
		Exceeded: c.exceeded.Load(), RolledBack: c.rolledBack.Load(), Reused: c.reused.Load(),
		Rollbacks: c.rollbacks.Load(), GivenBack: c.givenBack.Load(), Unavailable: c.unavailable.Load(),
		UndoFailed: c.undoFailed.Load(), RuleLoads: c.ruleLoads.Load(), RuleErrors: c.ruleErrors.Load(),
		Rules: c.rules.Load(),
	}
}
