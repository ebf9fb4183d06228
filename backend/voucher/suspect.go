package voucher

import (
	"context"
	"time"
)

// A Redis failover can lose a flash voucher's last writes: the new master may hold fewer uses
// left than the database leaves for the orders it lost (a lost release still holds its use),
// so a granted order whose take was lost would be refused OUT_OF_STOCK on its retry until
// reconciliation puts it back, breaking the promise that a granted order stays granted. So when
// the backend's Redis client sees a master go (SuspectGate), the gate is suspect until a
// reconciliation of every flash voucher that began after it has ended: meanwhile a refusal for
// lack of uses is checked against the database first, and an order the database holds for its
// customer is answered from its row, its hold put back in the gate. Only the refusals of that
// window pay for the lookup. A committed order the writer could not make sure Redis holds
// (keepHeld) leaves that one voucher suspect the same way (suspectVoucher): a Redis timeout
// during one sale moves no other voucher's refusals onto the database.

// SuspectGate says Redis may lack orders the database holds (its client saw a node fail or a
// slot move, or a check that committed orders are held failed): until the next complete
// reconciliation, refusals for lack of uses look at the database first.
func (s *Service) SuspectGate() { s.suspectSince.Store(time.Now().UnixNano()) }

// suspectVoucher says Redis may lack orders of the voucher code that the database holds (a
// check that its committed orders are held failed), until its next reconciliation.
func (s *Service) suspectVoucher(code string) { s.suspectCodes.Store(code, time.Now().UnixNano()) }

// gateSuspect reports whether the gate is suspect for the voucher code.
func (s *Service) gateSuspect(code string) bool {
	if s.suspectSince.Load() != 0 {
		return true
	}
	_, ok := s.suspectCodes.Load(code)
	return ok
}

// trustGateSince clears the suspicion of the whole gate if it was raised before began, when a
// reconciliation of every flash voucher ended that began then.
func (s *Service) trustGateSince(began int64) {
	for {
		since := s.suspectSince.Load()
		if since == 0 || since > began || s.suspectSince.CompareAndSwap(since, 0) {
			return
		}
	}
}

// trustVoucherSince clears the voucher's suspicion if it was raised before began, when its
// reconciliation that began then ended.
func (s *Service) trustVoucherSince(code string, began int64) {
	if since, ok := s.suspectCodes.Load(code); ok && since.(int64) <= began {
		s.suspectCodes.CompareAndDelete(code, since)
	}
}

// heldInDB answers a reservation the suspect gate refused for lack of uses from its row, when the
// database holds the order: ok is false (and the refusal stands) when it holds none.
func (s *Service) heldInDB(ctx context.Context, v Voucher, h Hold) (r Redemption, ok bool, err error) {
	seen, err := s.store.Lookup(ctx, v.Code, h.OrderID)
	switch {
	case err != nil:
		return Redemption{}, true, s.unavailable(err, "reserve %s: look up an order the suspect gate refused", v.Code)
	case seen.Existing == nil:
		return Redemption{}, false, nil
	}
	r, err = answerRetry(h.request(), *seen.Existing)
	if err == nil {
		s.keepHeldNow(v.Code, r) // the gate lost it: its use is the row's
	}
	return r, true, err
}
