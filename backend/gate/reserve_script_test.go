package gate_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/gate"
	"vouchergate/backend/voucher"
	"vouchergate/lua"
	"vouchergate/shared/keys"
)

// One call of reserve.lua with many reservations (what the auto-pipeline sends for a voucher's
// crowd) answers each exactly as its own call would, one after the other, and leaves the gate
// as they would: random crowds on a small voucher, with repeated orders and customers, callers
// whose revision is not the gate's, a sell-out in the middle of a call, and a paused and a
// missing voucher.
func TestOneCallAnswersAsOneCallEach(t *testing.T) {
	rdb, prefix := singleRedis(t)
	ctx := context.Background()
	g := gate.New(rdb, prefix)
	rng := rand.New(rand.NewPCG(7, 28))
	for trial := range 60 {
		v := voucher.Voucher{TotalLimit: 1 + rng.IntN(8), PerUserLimit: 1 + rng.IntN(2), Revision: 3, Paused: trial%15 == 14}
		n := 1 + rng.IntN(20)
		var args []any
		for i := range n {
			rev := v.Revision
			if rng.IntN(8) == 0 {
				rev++ // a caller with a copy the gate does not hold
			}
			customer := fmt.Sprintf("c%d", rng.IntN(4))
			args = append(args, customer, v.PerUserLimit, fmt.Sprintf("o%d", rng.IntN(10)),
				fmt.Sprintf("%d:a%d:%s", 1_700_000_000_000+trial, i, customer), rev)
		}
		codes := []string{fmt.Sprintf("T%d", trial), fmt.Sprintf("A%d", trial)}
		together, alone := keys.ForVoucher(prefix, codes[0]), keys.ForVoucher(prefix, codes[1])
		if trial%20 != 19 { // else neither is loaded
			for _, code := range codes {
				v.Code = code
				if _, err := g.Load(ctx, v, nil); err != nil {
					t.Fatal(err)
				}
			}
		}

		got, err := lua.Reserve.Run(ctx, rdb, together.List(), append([]any{n}, args...)...).Slice()
		if err != nil {
			t.Fatal(err)
		}
		var want []any
		for i := range n {
			one, err := lua.Reserve.Run(ctx, rdb, alone.List(), append([]any{1}, args[5*i:5*i+5]...)...).Slice()
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, one...)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("trial %d (%+v, %d reservations): one call answered\n%v\none call each\n%v", trial, v, n, got, want)
		}
		for _, k := range [][2]string{{together.Remaining, alone.Remaining}, {together.Users, alone.Users}, {together.Orders, alone.Orders}} {
			if a, b := read(t, rdb, k[0]), read(t, rdb, k[1]); !reflect.DeepEqual(a, b) {
				t.Errorf("trial %d: one call left %s = %v; one call each left %v", trial, k[0], a, b)
			}
		}
	}
}

// read returns what key holds: its string, or its hash's fields ("" and none when it is missing).
func read(t *testing.T, rdb redis.UniversalClient, key string) any {
	t.Helper()
	ctx := context.Background()
	kind, err := rdb.Type(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if kind == "hash" {
		return rdb.HGetAll(ctx, key).Val()
	}
	return rdb.Get(ctx, key).Val()
}
