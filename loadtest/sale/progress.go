package sale

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// progress prints m to w once a second until stop is closed: offered and achieved rate in
// the last second, answers by kind so far, and p99 so far.
func progress(w io.Writer, phase string, m *meter, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	began := time.Now()
	var lastReleased, lastAnswered int64
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		released := m.released.Load()
		m.mu.Lock()
		answered := int64(m.answered)
		p99 := time.Duration(m.latency.ValueAtQuantile(99)) * time.Microsecond
		kinds := slices.Sorted(maps.Keys(m.answers))
		var counts []string
		for _, k := range kinds {
			counts = append(counts, fmt.Sprintf("%s: %d", k, m.answers[k]))
		}
		m.mu.Unlock()
		fmt.Fprintf(w, "%s %3.0fs: offered %d/s, answered %d/s; %s; p99 so far %v\n", phase,
			time.Since(began).Seconds(), released-lastReleased, answered-lastAnswered, strings.Join(counts, ", "), p99)
		lastReleased, lastAnswered = released, answered
	}
}

// meter counts answers while a phase runs, for the progress line. Its methods may be called
// from several goroutines; a nil meter counts nothing.
type meter struct {
	released atomic.Int64 // requests that fell due
	mu       sync.Mutex
	answers  map[string]int
	latency  *hdrhistogram.Histogram
	answered int
}

func (m *meter) release() {
	if m != nil {
		m.released.Add(1)
	}
}

func newMeter() *meter {
	return &meter{answers: map[string]int{}, latency: newLatencyHistogram()}
}

func (m *meter) count(o *Outcome) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.answers[o.Key()]++
	if o.State == Answered {
		m.answered++
		_ = m.latency.RecordValue(int64(o.Latency() / time.Microsecond))
	}
	m.mu.Unlock()
}
