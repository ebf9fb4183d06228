package voucher

import (
	"context"
	"fmt"
	"time"

	"vouchergate/backend/batch"
)

// maxBatch bounds how many winners one transaction writes: enough to carry a flash sale past
// the hot row's rate many times over, small enough that one batch stays a few milliseconds.
const maxBatch = 256

// writer owns one voucher's reservation writes in this process (group commit): a flash
// voucher's winners, or a normal voucher's requests. They queue their holds and wait for their
// own outcome; while a batch commits the next winners
// gather, and when it commits all that gathered (up to maxBatch) go next as one transaction
// (batch.Queue). A lone winner is written at once, and batches grow with the load. Writers of
// other backends serialize with this one on the voucher's row lock.
type writer struct {
	s     *Service
	code  string
	flash bool // its written orders must be held in the gate
	queue *batch.Queue[*pendingWrite]
}

// pendingWrite is a winner's hold waiting in the queue, and where its outcome goes.
type pendingWrite struct {
	ctx  context.Context // the request's; a hold whose request gave up before it is sent is not sent
	hold Hold
	done chan Written
}

// writerFor returns the voucher's writer, making it on first use.
func (s *Service) writerFor(v Voucher) *writer {
	if w, ok := s.writers.Load(v.Code); ok {
		return w.(*writer)
	}
	w := &writer{s: s, code: v.Code, flash: v.FlashSale}
	w.queue = batch.New(maxBatch, w.commit)
	actual, _ := s.writers.LoadOrStore(v.Code, w)
	return actual.(*writer)
}

// write queues h and waits for its outcome, with Store.Reserve's answers: the redemption, a
// refusal (ErrNotEligible, ErrOutOfStock, ErrAlreadyUsed, ErrOrderExists, ErrVoucherNotFound),
// a failure wrapping ErrNotWritten, or a failure whose outcome is unknown. It does not return
// before the outcome is known or unknowable: the writer's own deadline bounds the wait.
func (w *writer) write(ctx context.Context, h Hold) (Redemption, error) {
	p := &pendingWrite{ctx: ctx, hold: h, done: make(chan Written, 1)}
	w.queue.Add(p)
	out := <-p.done
	return out.Redemption, out.Err
}

// commit writes one batch and answers each of its winners. A hold is sent only while its write
// can still end before staleAfter (counted from its reservation, as a retry counts it), so a
// retry that finds the hold stale can give it back: a hold that waited too long is answered
// ErrNotWritten, and the batch's deadline ends by the earliest hold's cutoff.
func (w *writer) commit(pending []*pendingWrite) {
	now := w.s.cfg.Clock.Now()
	budget := w.s.cfg.DBTimeout
	holds := make([]Hold, 0, len(pending))
	send := pending[:0:0]
	for _, p := range pending {
		sendBy := p.hold.ReservedAt.Truncate(time.Millisecond).Add(w.s.cfg.DBTimeout)
		switch {
		case p.ctx.Err() != nil:
			p.done <- Written{Err: fmt.Errorf("reserve %s: request ended before its write was sent: %w: %w", w.code, ErrNotWritten, p.ctx.Err())}
		case !now.Before(sendBy):
			p.done <- Written{Err: fmt.Errorf("reserve %s: hold waited %v to be written: %w", w.code, now.Sub(p.hold.ReservedAt), ErrNotWritten)}
		default:
			budget = min(budget, sendBy.Add(w.s.cfg.DBTimeout).Sub(now))
			holds = append(holds, p.hold)
			send = append(send, p)
		}
	}
	if len(send) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	w.s.written.batches.Add(1)
	w.s.written.holds.Add(int64(len(holds)))
	w.s.counts.batchRows.Observe(float64(len(holds)))
	out, err := w.s.store.ReserveMany(ctx, w.code, holds)
	// The next batch need not wait for this one's check in Redis: its winners are answered
	// once it is done, while the writer goes on.
	go w.answer(send, out, err)
}

// answer checks that a flash batch's written orders are held in the gate (keepHeld), then
// answers each winner with its own outcome, or all of them with the batch's failure.
func (w *writer) answer(send []*pendingWrite, out []Written, err error) {
	if err != nil {
		for _, p := range send {
			p.done <- Written{Err: err}
		}
		return
	}
	if w.flash {
		w.keepHeld(out)
	}
	for i, p := range send {
		p.done <- out[i]
	}
}

func (w *writer) keepHeld(out []Written) {
	written := make([]Redemption, 0, len(out))
	for _, o := range out {
		if o.Err == nil {
			written = append(written, o.Redemption)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.s.cfg.DBTimeout)
	w.s.keepHeld(ctx, w.code, written)
	cancel()
}
