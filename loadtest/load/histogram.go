package load

import (
	"math/bits"
	"slices"
	"time"
)

// subBits sets the histogram's precision: 2^subBits buckets per power of two, so a recorded
// latency is reported within about 3%.
const subBits = 5

const buckets = (64 - subBits) << subBits

// Histogram counts latencies in log-linear buckets. The zero value is empty and ready.
type Histogram struct {
	counts [buckets]int64
	total  int64
	max    time.Duration
}

func bucketOf(ns uint64) int {
	if ns < 1<<subBits {
		return int(ns)
	}
	shift := bits.Len64(ns) - subBits - 1
	return (shift+1)<<subBits + int((ns>>shift)&(1<<subBits-1))
}

// upper returns the largest value of bucket i.
func upper(i int) time.Duration {
	if i < 1<<subBits {
		return time.Duration(i)
	}
	shift := i>>subBits - 1
	sub := uint64(i & (1<<subBits - 1))
	return time.Duration(((1<<subBits + sub + 1) << shift) - 1)
}

// Record adds one latency.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	h.total++
	h.max = max(h.max, d)
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, n := range o.counts {
		h.counts[i] += n
	}
	h.total += o.total
	h.max = max(h.max, o.max)
}

// Count is the number of latencies recorded.
func (h *Histogram) Count() int64 { return h.total }

// Max is the largest latency recorded.
func (h *Histogram) Max() time.Duration { return h.max }

// Quantile returns the latency below which q (0..1) of the recorded ones fall, as the upper
// bound of its bucket.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := int64(q*float64(h.total) + 0.5)
	rank = max(rank, 1)
	var seen int64
	for i, n := range h.counts {
		seen += n
		if seen >= rank {
			return min(upper(i), h.max)
		}
	}
	return h.max
}

// Median is the middle of v (the upper one of an even count), 0 for none: how rounds of a
// comparison are summed up.
func Median[T float64 | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
