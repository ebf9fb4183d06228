package batch_test

import (
	"sync"
	"testing"

	"vouchergate/backend/batch"
)

// Items added while a batch is handled go in the next one, in order, never more than max at
// once, and each item is handed out exactly once.
func TestBatchesFormWhileOneIsHandled(t *testing.T) {
	var mu sync.Mutex
	var got []int
	sizes := map[int]int{}
	started, release := make(chan struct{}), make(chan struct{})
	first := true
	var wg sync.WaitGroup
	q := batch.New(4, func(items []int) {
		if first { // hold the first batch until the others have queued
			first = false
			close(started)
			<-release
		}
		mu.Lock()
		got = append(got, items...)
		sizes[len(items)]++
		mu.Unlock()
		for range items {
			wg.Done()
		}
	})
	wg.Add(11)
	q.Add(0) // a lone item goes at once
	<-started
	for i := 1; i <= 10; i++ {
		q.Add(i)
	}
	close(release)
	wg.Wait()
	for i, v := range got {
		if v != i {
			t.Fatalf("handled %v; want 0..10 in order", got)
		}
	}
	if sizes[1] != 1 || sizes[4] != 2 || sizes[2] != 1 {
		t.Errorf("batch sizes %v; want the lone first item, then 4, 4, 2", sizes)
	}
}
