package flashbench

import (
	"slices"
	"time"
)

func median[T float64 | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func collect[R any, T any](rs []R, f func(R) T) []T {
	out := make([]T, 0, len(rs))
	for _, r := range rs {
		out = append(out, f(r))
	}
	return out
}
