package quota

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ruleCache holds every rule in memory for the deduct path. It reloads them all when told (a
// NATS message after a change on any backend, or a change made here) and every refresh period
// as a backstop for lost messages, so a change is seen within seconds everywhere.
type ruleCache struct {
	store   *ruleStore
	log     *slog.Logger
	set     atomic.Pointer[ruleSet]
	kick    chan struct{}
	mu      sync.Mutex // one reload at a time, so an older read never replaces a newer one
	metrics *metrics
}

func newRuleCache(store *ruleStore, log *slog.Logger, m *metrics) *ruleCache {
	c := &ruleCache{store: store, log: log, kick: make(chan struct{}, 1), metrics: m}
	c.set.Store(newRuleSet(nil))
	return c
}

func (c *ruleCache) current() *ruleSet { return c.set.Load() }

func (c *ruleCache) reload(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	rules, err := c.store.all(ctx)
	if err != nil {
		c.metrics.ruleErrors.Add(1)
		return err
	}
	c.set.Store(newRuleSet(rules))
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

// run reloads on each poke and every period until ctx ends.
func (c *ruleCache) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := c.reload(rctx); err != nil && ctx.Err() == nil {
			c.log.Warn("quota: reload rules; keeping the ones held", "err", err)
		}
		cancel()
	}
}

// ruleSet is an immutable snapshot of every rule, indexed for the deduct path.
type ruleSet struct {
	byType map[typeKey][]*Rule
	all    []*Rule
}

type typeKey struct {
	biz int64
	typ string
}

func newRuleSet(rules []Rule) *ruleSet {
	s := &ruleSet{byType: make(map[typeKey][]*Rule), all: make([]*Rule, len(rules))}
	for i := range rules {
		r := &rules[i]
		r.limitArg = r.Limit
		s.all[i] = r
		k := typeKey{r.BizID, r.IdentityType}
		s.byType[k] = append(s.byType[k], r)
	}
	return s
}

func (s *ruleSet) forType(biz int64, typ string) []*Rule { return s.byType[typeKey{biz, typ}] }
