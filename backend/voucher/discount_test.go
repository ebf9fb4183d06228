package voucher_test

import (
	"math"
	"math/big"
	"testing"

	"vouchergate/backend/voucher"
)

// bigDiscount is the discount as the admin API documents it, computed in arbitrary precision:
// min(floor(amount × percent / 100), cap, amount), or min(fixed, amount).
func bigDiscount(v voucher.Voucher, amount int64) int64 {
	if v.DiscountPercent == 0 {
		return min(v.DiscountAmount, amount)
	}
	d := new(big.Int).Mul(big.NewInt(amount), big.NewInt(int64(v.DiscountPercent)))
	d.Quo(d, big.NewInt(100)) // amount ≥ 0: truncation is the floor
	if v.MaxDiscountAmount != nil && d.Cmp(big.NewInt(*v.MaxDiscountAmount)) > 0 {
		d.SetInt64(*v.MaxDiscountAmount)
	}
	if d.Cmp(big.NewInt(amount)) > 0 {
		d.SetInt64(amount)
	}
	return d.Int64()
}

func TestPercentageRoundingAndCaps(t *testing.T) {
	capped := func(n int64) *int64 { return &n }
	for _, c := range []struct {
		percent int
		cap     *int64
		amount  int64
		want    int64
	}{
		{15, nil, 0, 0}, {15, nil, 6, 0}, {15, nil, 7, 1}, {15, nil, 999, 149}, {15, nil, 1000, 150},
		{33, nil, 100, 33}, {33, nil, 101, 33}, {33, nil, 303, 99}, {1, nil, 99, 0}, {1, nil, 100, 1},
		{100, nil, 12345, 12345}, {100, capped(500), 12345, 500}, {15, capped(500), 3333, 499}, {15, capped(500), 3334, 500},
		{15, capped(0), 1000, 0}, {50, nil, math.MaxInt64, math.MaxInt64 / 2}, {100, nil, math.MaxInt64, math.MaxInt64},
		{99, nil, math.MaxInt64, 9131138316486228048},
	} {
		v := voucher.Voucher{DiscountPercent: c.percent, MaxDiscountAmount: c.cap}
		if got := v.Discount(c.amount); got != c.want {
			t.Errorf("%d%% (cap %v) of %d: %d; want %d", c.percent, c.cap, c.amount, got, c.want)
		}
	}
	if got := (voucher.Voucher{DiscountAmount: 300}).Discount(200); got != 200 {
		t.Errorf("300 off 200: %d; want 200", got)
	}
}

// go test -fuzz=FuzzDiscount ./backend/voucher: the discount equals the documented formula
// computed without overflow, for every amount, percentage and cap.
func FuzzDiscount(f *testing.F) {
	f.Add(int64(999), 15, int64(500), true)
	f.Add(int64(math.MaxInt64), 99, int64(0), false)
	f.Add(int64(7), 1, int64(-1), false)
	f.Fuzz(func(t *testing.T, amount int64, percent int, maxDiscount int64, hasCap bool) {
		if amount < 0 || percent < 0 || percent > 100 || maxDiscount < 0 {
			return // the decoders refuse these
		}
		v := voucher.Voucher{DiscountPercent: percent, DiscountAmount: maxDiscount}
		if percent != 0 {
			v.DiscountAmount = 0
			if hasCap {
				v.MaxDiscountAmount = &maxDiscount
			}
		}
		if got, want := v.Discount(amount), bigDiscount(v, amount); got != want {
			t.Fatalf("%+v of %d: %d; want %d", v, amount, got, want)
		}
	})
}
