package quota

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrMayEvict: a Redis master's maxmemory-policy can evict quota keys. Every quota key has a
// TTL (a window's end, an idemKey's VG_QUOTA_IDEM_TTL), so volatile-* policies reach them as
// surely as allkeys-* ones: an evicted counter is a window reset (a customer buys past the
// limit), an evicted idemKey record a retry counted twice. Only noeviction keeps them.
var ErrMayEvict = errors.New("redis maxmemory-policy can evict quota keys")

// ErrEvictionUnknown: a Redis master answered, but not with its maxmemory-policy (CONFIG renamed
// or disabled, as managed Redis services run it). The policy is then the operator's to check
// with the provider: it is reported, and the backend serves.
var ErrEvictionUnknown = errors.New("redis maxmemory-policy cannot be read")

// EvictionPolicies reads maxmemory-policy from the single Redis, or from every master of a
// cluster, by address: "" for a master that answered CONFIG GET with an error (CONFIG renamed
// or disabled) or without the policy. The error is a master that could not be asked.
func EvictionPolicies(ctx context.Context, rdb redis.UniversalClient) (map[string]string, error) {
	out := map[string]string{}
	read := func(ctx context.Context, c *redis.Client) error {
		v, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		var answer redis.Error
		if err != nil && !errors.As(err, &answer) {
			return fmt.Errorf("read maxmemory-policy of %s: %w", c.Options().Addr, err)
		}
		out[c.Options().Addr] = v["maxmemory-policy"]
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex // ForEachMaster calls at once
		err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return read(ctx, node)
		})
	case *redis.Client:
		err = read(ctx, c)
	default:
		err = fmt.Errorf("cannot read the maxmemory-policy of a %T", rdb)
	}
	return out, err
}

// CheckEviction returns an ErrMayEvict naming each master whose maxmemory-policy is not
// noeviction and what to do; else an ErrEvictionUnknown naming each master that would not say;
// nil when every master has noeviction; or the error that kept it from looking. It records
// what it saw for vouchergate_quota_redis_may_evict and vouchergate_quota_redis_eviction_unknown,
// and logs a change into either state.
func (s *Service) CheckEviction(ctx context.Context) error {
	policies, err := EvictionPolicies(ctx, s.cfg.Redis)
	if err != nil {
		return err
	}
	var bad, unread []string
	for addr, p := range policies {
		switch p {
		case "noeviction":
		case "":
			unread = append(unread, addr)
		default:
			bad = append(bad, addr+" has "+p)
		}
	}
	slices.Sort(bad)
	slices.Sort(unread)
	wasBad := s.metrics.mayEvict.Swap(len(bad) > 0)
	wasUnread := s.metrics.evictionUnknown.Swap(len(bad) == 0 && len(unread) > 0)
	switch {
	case len(bad) > 0:
		err = fmt.Errorf("%w: %s; run Redis with maxmemory-policy noeviction (quota keys expire with their windows by themselves), "+
			"or set VG_QUOTA_EVICTION=allow to accept that eviction resets windows and forgets idemKeys", ErrMayEvict, strings.Join(bad, ", "))
		if !wasBad {
			s.cfg.Log.Warn("quota: Redis may evict quota keys", "err", err)
		}
	case len(unread) > 0:
		err = fmt.Errorf("%w: %s refused CONFIG GET (CONFIG renamed or disabled, as on managed Redis); make sure with the provider "+
			"that its maxmemory-policy is noeviction: eviction resets windows and forgets idemKeys", ErrEvictionUnknown, strings.Join(unread, ", "))
		if !wasUnread {
			s.cfg.Log.Warn("quota: cannot read Redis' maxmemory-policy; serving, eviction unchecked", "err", err)
		}
	}
	return err
}

// everyRefresh runs with each periodic rule refresh: it looks at the eviction policy again, so
// that the metric follows a policy changed at run time.
func (s *Service) everyRefresh(ctx context.Context) {
	_ = s.CheckEviction(ctx)
}
