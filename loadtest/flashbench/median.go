package flashbench

import (
	"time"

	"vouchergate/loadtest/load"
)

func median[T float64 | time.Duration](v []T) T { return load.Median(v) }

func collect[R any, T any](rs []R, f func(R) T) []T {
	out := make([]T, 0, len(rs))
	for _, r := range rs {
		out = append(out, f(r))
	}
	return out
}
