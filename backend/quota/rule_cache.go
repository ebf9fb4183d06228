package quota

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"vouchergate/shared/clock"
)

// ruleCache holds every rule, override and business line setting in memory for the deduct
// path. It reloads them all when told (a NATS message after a change on any backend, or a
// change made here) and every refresh period as a backstop for lost messages, so a change is
// seen within milliseconds everywhere NATS reaches, and within the period otherwise.
type ruleCache struct {
	store   *ruleStore
	clock   clock.Clock
	log     *slog.Logger
	set     atomic.Pointer[ruleSet]
	kick    chan struct{}
	mu      sync.Mutex // one reload at a time, so an older read never replaces a newer one
	metrics *metrics
}

func newRuleCache(store *ruleStore, clk clock.Clock, log *slog.Logger, m *metrics) *ruleCache {
	c := &ruleCache{store: store, clock: clk, log: log, kick: make(chan struct{}, 1), metrics: m}
	c.set.Store(newRuleSet(nil, nil, nil))
	return c
}

func (c *ruleCache) current() *ruleSet { return c.set.Load() }

func (c *ruleCache) reload(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	rules, overrides, open, err := c.store.snapshot(ctx, c.clock.Now())
	if err != nil {
		c.metrics.ruleErrors.Add(1)
		return err
	}
	c.set.Store(newRuleSet(rules, overrides, open))
	for _, biz := range open {
		c.metrics.openLine(biz)
	}
	c.metrics.ruleLoads.Add(1)
	c.metrics.rules.Store(uint64(len(rules)))
	return nil
}

// poke asks the run loop to reload soon; pokes while one is pending merge into it.
func (c *ruleCache) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run reloads on each poke and every period until ctx ends, and calls tick every period.
func (c *ruleCache) run(ctx context.Context, every time.Duration, tick func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-t.C:
			tick(ctx)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := c.reload(rctx); err != nil && ctx.Err() == nil {
			c.log.Warn("quota: reload rules; keeping the ones held", "err", err)
		}
		cancel()
	}
}

// ruleSet is an immutable snapshot of every rule, override and OPEN business line, indexed for
// the deduct path.
type ruleSet struct {
	byType    map[typeKey][]*Rule
	all       []*Rule
	overrides map[overrideKey]*Override
	open      map[int64]bool // bizIds whose deducts degrade open without Redis
}

type typeKey struct {
	biz int64
	typ string
}

type overrideKey struct {
	rule     int64
	identity string
}

func newRuleSet(rules []Rule, overrides []Override, open []int64) *ruleSet {
	s := &ruleSet{byType: make(map[typeKey][]*Rule), all: make([]*Rule, len(rules)),
		overrides: make(map[overrideKey]*Override, len(overrides)), open: make(map[int64]bool, len(open))}
	byID := make(map[int64]*Rule, len(rules))
	for i := range rules {
		r := &rules[i]
		r.limitArg = r.Limit
		s.all[i] = r
		byID[r.ID] = r
		k := typeKey{r.BizID, r.IdentityType}
		s.byType[k] = append(s.byType[k], r)
	}
	for i := range overrides {
		o := &overrides[i]
		if r := byID[o.RuleID]; r != nil {
			o.limitArg = o.Limit
			r.overridden = true
			s.overrides[overrideKey{o.RuleID, o.Identity}] = o
		}
	}
	for _, b := range open {
		s.open[b] = true
	}
	return s
}

func (s *ruleSet) forType(biz int64, typ string) []*Rule { return s.byType[typeKey{biz, typ}] }

// limitFor is r's limit for identity at now: its override's while one is in force, else r's.
func (s *ruleSet) limitFor(r *Rule, identity string, now time.Time) (int64, any) {
	if r.overridden {
		if o := s.overrides[overrideKey{r.ID, identity}]; o != nil && o.active(now) {
			return o.Limit, o.limitArg
		}
	}
	return r.Limit, r.limitArg
}
