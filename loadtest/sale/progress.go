package sale

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
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
