package app

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"vouchergate/testkit"
)

// Every slot's probe tag puts a key in that very slot, as a live cluster node computes it
// (CLUSTER KEYSLOT), whatever prefix comes before the tag.
func TestSlotTagsLandInTheirSlots(t *testing.T) {
	cluster := testkit.StartRedisCluster(t)
	rdb := redis.NewClient(&redis.Options{Addr: cluster.Addrs()[0]})
	defer rdb.Close()
	pipe := rdb.Pipeline()
	asked := make([]*redis.IntCmd, clusterSlots)
	for slot := range clusterSlots {
		asked[slot] = pipe.ClusterKeySlot(t.Context(), "vg:test:probe:{"+slotTag(slot)+"}")
	}
	if _, err := pipe.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	wrong := 0
	for slot, cmd := range asked {
		if got := cmd.Val(); got != int64(slot) && wrong < 5 {
			wrong++
			t.Errorf("slot %d's tag %q lands in slot %d", slot, slotTag(slot), got)
		}
	}
}
