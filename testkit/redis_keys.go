package testkit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisKey is what one key holds, read as its content rather than its encoding (DUMP of a
// hash table depends on where an incremental rehash, which reads also advance, has got to).
type RedisKey struct {
	Type  string
	Value string        // strings: the value; hashes: sorted field=value lines; sorted sets: member@score lines
	TTL   time.Duration // -1: none
}

// RedisKeys reads every key under prefix on a single Redis or on every master of a cluster.
func RedisKeys(ctx context.Context, rdb redis.UniversalClient, prefix string) (map[string]RedisKey, error) {
	out := map[string]RedisKey{}
	var mu sync.Mutex // a cluster's masters are read at once
	read := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			k, err := readKey(ctx, c, iter.Val())
			if err != nil {
				return err
			}
			mu.Lock()
			out[iter.Val()] = k
			mu.Unlock()
		}
		return iter.Err()
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return out, c.ForEachMaster(ctx, read)
	case *redis.Client:
		return out, read(ctx, c)
	}
	return nil, fmt.Errorf("read keys: unexpected client %T", rdb)
}

func readKey(ctx context.Context, c *redis.Client, key string) (RedisKey, error) {
	typ, err := c.Type(ctx, key).Result()
	if err != nil {
		return RedisKey{}, fmt.Errorf("type of %s: %w", key, err)
	}
	k := RedisKey{Type: typ}
	switch typ {
	case "string":
		k.Value, err = c.Get(ctx, key).Result()
	case "hash":
		var h map[string]string
		if h, err = c.HGetAll(ctx, key).Result(); err == nil {
			lines := make([]string, 0, len(h))
			for _, f := range slices.Sorted(maps.Keys(h)) {
				lines = append(lines, f+"="+h[f])
			}
			k.Value = strings.Join(lines, "\n")
		}
	case "zset":
		var zs []redis.Z
		if zs, err = c.ZRangeWithScores(ctx, key, 0, -1).Result(); err == nil {
			lines := make([]string, len(zs))
			for i, z := range zs {
				lines[i] = fmt.Sprintf("%v@%v", z.Member, z.Score)
			}
			k.Value = strings.Join(lines, "\n")
		}
	default:
		k.Value, err = c.Dump(ctx, key).Result()
	}
	if err != nil {
		return RedisKey{}, fmt.Errorf("read %s: %w", key, err)
	}
	if k.TTL, err = c.PTTL(ctx, key).Result(); err != nil {
		return RedisKey{}, fmt.Errorf("ttl of %s: %w", key, err)
	}
	return k, nil
}

// RedisChanges lists the keys that differ from before to after: added, removed, another
// content, or a time to live set, cleared or moved later (one only counting down is no change).
func RedisChanges(before, after map[string]RedisKey) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[k]; !ok {
			out = append(out, "key "+k+" removed")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		was, ok := before[k]
		now := after[k]
		switch {
		case !ok:
			out = append(out, "key "+k+" added")
		case was.Type != now.Type || was.Value != now.Value:
			out = append(out, fmt.Sprintf("key %s: %s %q -> %s %q", k, was.Type, was.Value, now.Type, now.Value))
		case (was.TTL < 0) != (now.TTL < 0) || now.TTL > was.TTL:
			out = append(out, fmt.Sprintf("key %s: time to live %v -> %v", k, was.TTL, now.TTL))
		}
	}
	return out
}
