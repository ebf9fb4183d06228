package voucher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"vouchergate/shared/wire"
)

// A retry looks for its first attempt's outcome after pollFirst, then twice as long each time up
// to pollMost, so a crowd of retries does not crowd out the writes they wait for.
const (
	pollFirst = 5 * time.Millisecond
	pollMost  = 100 * time.Millisecond
)

// reserveFlash is the flash voucher's path: the Redis gate decides in one round trip, and only
// its winners write the database, synchronously, before the answer. try counts the copies of
// the voucher this reservation was decided with (Reserve).
func (s *Service) reserveFlash(ctx context.Context, v Voucher, h Hold, try int) (Redemption, error) {
	if s.gate == nil {
		return Redemption{}, fmt.Errorf("reserve %s: no redis gate: %w", v.Code, ErrUnavailable)
	}
	holder := Holder{CustomerID: h.CustomerID, ReservedAt: h.ReservedAt, Attempt: newAttempt()}
	// In flight before the gate can name it: a retry that finds the order held by this attempt
	// then always finds it here too, and waits for this call's outcome.
	defer s.flights.begin(holder.Attempt)()
	waitUntil := time.Now().Add(s.cfg.InFlightWait)
	loaded := false
	for {
		res, err := s.gate.Reserve(ctx, v, h.OrderID, holder)
		if err != nil {
			return Redemption{}, s.unavailable(err, "reserve %s: redis gate", v.Code)
		}
		switch res.Outcome {
		case GateReserved:
			s.counts.usesLeft.WithLabelValues(v.Code).Set(float64(res.Remaining))
			if res.Remaining == 0 {
				s.notify.SoldOut(v.Code)
			}
			if early201 != nil {
				return early201(s, ctx, v, h, holder)
			}
			return s.writeWinner(ctx, v, h, holder)
		case GateOutOfStock:
			if s.gateSuspect(v.Code) {
				if r, held, err := s.heldInDB(ctx, v, h); held {
					return r, err
				}
			}
			s.counts.usesLeft.WithLabelValues(v.Code).Set(0)
			s.notify.SoldOut(v.Code)
			return Redemption{}, ErrOutOfStock
		case GateAtLimit:
			return Redemption{}, ErrAlreadyUsed
		case GateStale:
			return Redemption{}, s.reviseFlash(ctx, v, res.Revision, try)
		case GatePaused:
			// The gate holds this revision paused: a retry of a granted order keeps its answer.
			return s.closed(ctx, v, h.request(), h.ReservedAt, ErrPaused)
		case GateNotLoaded:
			if loaded {
				return Redemption{}, fmt.Errorf("reserve %s: voucher still not in redis after loading: %w", v.Code, ErrUnavailable)
			}
			loaded = true
			if err := s.Warm(ctx, v.Code); err != nil {
				return Redemption{}, s.unavailable(err, "reserve %s", v.Code)
			}
		case GateHeld:
			if res.Holder.Same(holder) {
				// our own take, answered to an earlier try of this same call
				return s.writeWinner(ctx, v, h, holder)
			}
			if res.Holder.CustomerID != h.CustomerID {
				return Redemption{}, fmt.Errorf("order %s belongs to another customer: %w", wire.ClientOrderID(h.OrderID), ErrAlreadyUsed)
			}
			r, again, err := s.awaitFirstAttempt(ctx, h, res.Holder, waitUntil)
			if !again {
				return r, err
			}
		default:
			return Redemption{}, fmt.Errorf("reserve %s: redis gate answered %d: %w", v.Code, res.Outcome, ErrUnavailable)
		}
	}
}

// reviseFlash brings this backend's copy of a flash voucher and the gate's definition to one
// revision, after the gate answered that it holds revision held rather than v's, and returns
// errRevised: the reservation is decided again with the voucher as it is now.
//
//   - The gate is behind (its Redis lost an edit, or the edit's own step in Redis failed): this
//     copy, read from the database, is the newer; give it to the gate.
//   - The gate is ahead: read the voucher again. An edit gives the gate its definition while it
//     holds the voucher's row lock, just before it commits, so for a moment the gate may be
//     ahead of the database too; wait a little for the commit. A gate still ahead after a few
//     tries holds an edit whose commit failed, which repairGate undoes.
func (s *Service) reviseFlash(ctx context.Context, v Voucher, held int64, try int) error {
	if held < v.Revision {
		if _, err := s.gate.Configure(ctx, v, ConfigureNewer); err != nil {
			return s.unavailable(err, "reserve %s: give the gate revision %d", v.Code, v.Revision)
		}
		return errRevised
	}
	fresh, err := s.freshVoucher(ctx, v.Code)
	if err != nil {
		return s.unavailable(err, "reserve %s: read voucher again", v.Code)
	}
	if fresh.Revision >= held {
		return errRevised
	}
	if try >= revisedTries/2 {
		if err := s.repairGate(ctx, v.Code); err != nil {
			return s.unavailable(err, "reserve %s", v.Code)
		}
		return errRevised
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("reserve %s: %w: %w", v.Code, ErrUnavailable, ctx.Err())
	case <-time.After(pollFirst << try):
	}
	return errRevised
}

// awaitFirstAttempt handles a retry whose order holds a use in Redis: it answers 201 only from a
// committed row (D4), so it waits until the row appears (answer it) or the first attempt gives
// the use back (again: take a use anew), and answers ErrUnavailable if neither happens in time.
// A first attempt still writing in this process is waited for in memory (flights.go) before
// the database and the gate are looked at; another process's is polled for.
//
// A hold older than any write can last (staleAfter) with no row belongs to an attempt that
// died or whose outcome stayed unknown: the retry gives that use back itself, as the
// reconciler would, and takes one anew. Should the lost write commit after all, the database's
// guards still refuse an over-allocation and the reconciler puts the order back in Redis.
func (s *Service) awaitFirstAttempt(ctx context.Context, h Hold, first Holder, until time.Time) (r Redemption, again bool, err error) {
	if settled := s.flights.of(first.Attempt); settled != nil {
		// The first attempt is in flight in this process: its outcome is known here first.
		select {
		case <-settled:
		case <-ctx.Done():
			return Redemption{}, false, fmt.Errorf("reserve %s: %w: %w", h.VoucherCode, ErrUnavailable, ctx.Err())
		case <-time.After(time.Until(until)):
		}
	}
	pause := pollFirst
	for {
		r, err := s.store.Redemption(ctx, h.OrderID)
		if err == nil {
			r, err := answerRetry(h.request(), r)
			return r, false, err
		}
		if !errors.Is(err, ErrReservationNotFound) {
			return Redemption{}, false, s.unavailable(err, "reserve %s: look up order in flight", h.VoucherCode)
		}
		if s.cfg.Clock.Now().Sub(first.ReservedAt) > s.staleAfter() {
			s.logRepeated(slog.LevelWarn, "giving back a stale hold with no row", "code", h.VoucherCode, "order", h.OrderID)
			if _, err := s.giveBackSeen(ctx, h.VoucherCode, h.OrderID, &first); err != nil {
				return Redemption{}, false, s.unavailable(err, "reserve %s: give back stale hold", h.VoucherCode)
			}
			return Redemption{}, true, nil
		}
		_, held, err := s.gate.Holding(ctx, h.VoucherCode, h.OrderID)
		switch {
		case err != nil:
			return Redemption{}, false, s.unavailable(err, "reserve %s: look up order in redis", h.VoucherCode)
		case !held:
			return Redemption{}, true, nil
		case time.Now().After(until):
			return Redemption{}, false, fmt.Errorf("reserve %s: order %s is held in redis but not written yet: %w",
				h.VoucherCode, h.OrderID, ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return Redemption{}, false, fmt.Errorf("reserve %s: %w: %w", h.VoucherCode, ErrUnavailable, ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, pollMost)
	}
}

// staleAfter is how old a hold with no row must be before no write of it can still commit:
// the write is sent only within VG_DB_TIMEOUT of the reservation and given VG_DB_TIMEOUT to end
// (its server-side limit ends sooner), as the writing backend's clock counts. Another backend
// reads the hold's reservation time against its own clock, so the clocks' largest disagreement
// (VG_MAX_CLOCK_SKEW) is added: a clock behind the writer's must not see a hold in flight as
// stale.
func (s *Service) staleAfter() time.Duration { return 2*s.cfg.DBTimeout + s.cfg.MaxClockSkew }

// writeWinner writes the redemption of an order the gate admitted, in its voucher's next batch
// (writer.go), and gives the use back to the gate when, and only when, the database certainly
// did not take it.
func (s *Service) writeWinner(ctx context.Context, v Voucher, h Hold, holder Holder) (Redemption, error) {
	r, err := s.writerFor(v).write(ctx, h)
	switch {
	case err == nil:
		return r, nil
	case errors.Is(err, ErrOrderExists) || isDomain(err):
		// The database refused. If it holds this order already (Redis had lost it, or the
		// refusal counted it), the gate's entry is right: keep it and answer from the row.
		existing, rerr := s.readBack(h.OrderID)
		switch {
		case rerr == nil && existing.Active() && existing.VoucherCode == v.Code && existing.CustomerID == h.CustomerID:
			return existing, nil
		case rerr != nil && !errors.Is(rerr, ErrReservationNotFound):
			return Redemption{}, s.unavailable(rerr, "reserve %s: read order after a refusal", v.Code)
		}
		if rerr == nil {
			// The order was decided before (released, or another customer's or voucher's): this
			// is a request sent again, refused as answerRetry says, and the use its gate call
			// took goes back. No write failed, so it is no compensation.
			s.giveBackRetry(v.Code, h.OrderID, holder)
			return answerRetry(h.request(), existing)
		}
		s.compensate(v.Code, h.OrderID, holder)
		return Redemption{}, err
	case errors.Is(err, ErrNotWritten):
		s.compensate(v.Code, h.OrderID, holder)
		return Redemption{}, s.unavailable(err, "reserve %s: write redemption", v.Code)
	}
	// The commit's outcome is unknown. Answer from the row if it is there, once the gate holds
	// it (a retry or the reconciler may have given the use back meanwhile, as a hold with no
	// row); otherwise leave the use held in Redis (under-allocation) for the reconciler, which
	// decides once the database can tell.
	if existing, rerr := s.readBack(h.OrderID); rerr == nil {
		if existing.Active() && existing.VoucherCode == v.Code && existing.CustomerID == h.CustomerID {
			s.keepHeldNow(v.Code, existing)
			return existing, nil
		}
	}
	s.logRepeated(slog.LevelWarn, "reservation write outcome unknown; use left held in redis for the reconciler",
		"code", v.Code, "order", h.OrderID, "err", err)
	return Redemption{}, s.unavailable(err, "reserve %s: write redemption", v.Code)
}

// readBack reads an order's redemption with its own deadline, after the request's may be spent.
func (s *Service) readBack(orderID string) (Redemption, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DBTimeout)
	defer cancel()
	return s.store.Redemption(ctx, orderID)
}

// compensate gives back the use this attempt took in the gate. If Redis cannot be reached the
// use stays held (under-allocation) until the reconciler releases it.
func (s *Service) compensate(code, orderID string, holder Holder) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DBTimeout)
	defer cancel()
	released, err := s.giveBackSeen(ctx, code, orderID, &holder)
	switch {
	case err != nil:
		s.counts.compensations.WithLabelValues("failed").Inc()
		s.logRepeated(slog.LevelWarn, "compensating release failed; use left held in redis for the reconciler",
			"code", code, "order", orderID, "err", err)
	case released:
		s.counts.compensations.WithLabelValues("released").Inc()
		s.logRepeated(slog.LevelInfo, "use given back in redis after its write failed", "code", code, "order", orderID)
	default:
		// the gate held no use for this attempt any more: it went back another way (giveBackSeen)
		s.counts.compensations.WithLabelValues("nothing_held").Inc()
	}
}

// giveBackRetry gives back the use a re-sent order's gate call took, once the database answered
// that the order was decided before. A failure leaves it held for the reconciler.
func (s *Service) giveBackRetry(code, orderID string, holder Holder) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DBTimeout)
	defer cancel()
	if _, err := s.giveBackSeen(ctx, code, orderID, &holder); err != nil {
		s.logRepeated(slog.LevelWarn, "give back the use of a re-sent order failed; the reconciler will release it",
			"code", code, "order", orderID, "err", err)
	}
}

// giveBack gives back in the gate the use orderID holds (only expect's, when not nil), and tells
// the edges when that makes a sold-out voucher available again. Every way a use goes back to
// Redis passes here, so no transition out of sold out goes unannounced.
func (s *Service) giveBack(ctx context.Context, code, orderID string, expect *Holder) (released bool, err error) {
	released, _, err = s.release(ctx, code, orderID, expect)
	return released, err
}

// giveBackSeen is giveBack for a use seen held a moment ago: the one this attempt took (its
// compensation, or the give-back of a re-sent order the database refused), or a stale hold a
// retry just read. Finding nothing held then means the use went back another way meanwhile: a
// retry of the order took the hold for stale, the reconciler released it, or an earlier send
// of this release ran though its caller never heard the reply. That last one told the edges
// nothing, and it may have ended a sell-out, so with uses left the edges are told here. The
// notice publishes the state read from Redis: one too many costs a publication, one missing
// would leave the edges answering sold out.
func (s *Service) giveBackSeen(ctx context.Context, code, orderID string, expect *Holder) (released bool, err error) {
	released, remaining, err := s.release(ctx, code, orderID, expect)
	if err == nil && !released && remaining >= 1 {
		s.notify.BackInStock(code)
	}
	return released, err
}

// release is giveBack, also returning the uses left after it (-1: the voucher is not loaded).
func (s *Service) release(ctx context.Context, code, orderID string, expect *Holder) (released bool, remaining int64, err error) {
	released, remaining, err = s.gate.Release(ctx, code, orderID, expect)
	if err != nil || !released {
		return false, remaining, err
	}
	s.counts.usesLeft.WithLabelValues(code).Set(float64(remaining))
	if remaining == 1 {
		s.notify.BackInStock(code)
	}
	return true, remaining, nil
}
