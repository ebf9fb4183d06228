// Package batch groups work by arrival: items added while a batch is being handled form the
// next batch, handled as soon as the last one is done. There is no timer, so a lone item is
// handled at once and batches grow with the load. The flash writer (one transaction per batch)
// and the gate's auto-pipeline (one Redis pipeline per batch) are built on it.
package batch

import "sync"

// Queue hands what is added to handle, in batches of at most max, in arrival order, from one
// goroutine at a time that exists only while there is work. Safe for concurrent use.
type Queue[T any] struct {
	max    int
	handle func([]T)

	mu      sync.Mutex
	items   []T
	running bool
}

// New returns a queue that hands batches of at most max items to handle.
func New[T any](max int, handle func([]T)) *Queue[T] {
	return &Queue[T]{max: max, handle: handle}
}

// Add queues item, starting the goroutine that hands out batches if none runs.
func (q *Queue[T]) Add(item T) {
	q.mu.Lock()
	q.items = append(q.items, item)
	if !q.running {
		q.running = true
		go q.run()
	}
	q.mu.Unlock()
}

// run hands out batches until the queue is empty.
func (q *Queue[T]) run() {
	for {
		q.mu.Lock()
		n := min(len(q.items), q.max)
		if n == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		batch := q.items[:n:n]
		q.items = q.items[n:]
		if len(q.items) == 0 {
			q.items = nil // let the handed-out batch's array go with it
		}
		q.mu.Unlock()
		q.handle(batch)
	}
}
