package app

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// writeEveryMaster is the probe's write on Redis Cluster: one key in a slot of each master
// CLUSTER SLOTS lists, in one pipeline. Each master has its own memory: a full one refuses the
// writes of its slots while the others take theirs, so a single key would test one master
// only. The error names every master that refused, and why.
func (p *redisProbe) writeEveryMaster(ctx context.Context, c *redis.ClusterClient) error {
	ranges, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return fmt.Errorf("redis cluster: read which masters serve the slots: %w", err)
	}
	aSlot := map[string]int{} // master's address → a slot it serves
	for _, r := range ranges {
		if len(r.Nodes) == 0 {
			continue
		}
		if _, seen := aSlot[r.Nodes[0].Addr]; !seen {
			aSlot[r.Nodes[0].Addr] = r.Start
		}
	}
	masters := make([]string, 0, len(aSlot))
	for addr := range aSlot {
		masters = append(masters, addr)
	}
	slices.Sort(masters)
	pipe := c.Pipeline()
	sets := make([]*redis.StatusCmd, len(masters))
	for i, addr := range masters {
		sets[i] = pipe.Set(ctx, p.prefix+"probe:{"+slotTag(aSlot[addr])+"}", "1", probeKeyTTL)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own master's error
	var refused []string
	for i, set := range sets {
		if err := set.Err(); err != nil {
			refused = append(refused, fmt.Sprintf("master %s: %v", masters[i], err))
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("redis refuses writes: %s", strings.Join(refused, "; "))
	}
	return nil
}

// clusterSlots is the number of hash slots of Redis Cluster.
const clusterSlots = 16384

// slotTag returns a hash tag whose keys live in slot: a decimal number, the first whose
// CRC16 lands there.
func slotTag(slot int) string {
	return strconv.FormatUint(uint64(slotTags()[slot]), 10)
}

// slotTags is slotTag's table, made on first use (about 110,000 CRCs, some 10 ms, once).
var slotTags = sync.OnceValue(func() *[clusterSlots]uint32 {
	var tags [clusterSlots]uint32
	found := make([]bool, clusterSlots)
	left := clusterSlots
	var buf []byte
	for n := uint32(0); left > 0; n++ {
		buf = strconv.AppendUint(buf[:0], uint64(n), 10)
		if s := crc16(buf) % clusterSlots; !found[s] {
			found[s], tags[s] = true, n
			left--
		}
	}
	return &tags
})

// crc16 is the CRC Redis Cluster maps keys to slots with (CRC-16/XMODEM: polynomial 0x1021,
// no reflection, initial value 0).
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
