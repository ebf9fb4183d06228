package voucher

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Reconciliation is what Reconcile found in Redis against the database, and what it fixed.
type Reconciliation struct {
	Code            string
	Loaded          bool     // Redis did not have the voucher: loaded from the database
	Released        []string // orders held in Redis with no active row, past the grace period
	PutBack         []string // active rows Redis had lost
	InFlight        int      // held in Redis without a row, within the grace period
	RemainingBefore int64    // Redis's uses left before
	RemainingAfter  int64    // after
	TotalLimit      int      // the voucher's total_limit
	Expected        int64    // total_limit minus the active rows and the orders in flight
	Drift           int64    // RemainingBefore - Expected
	Recounted       bool     // remaining or per-customer counts had to be rebuilt
}

// ReconcileConfig tunes reconciliation.
type ReconcileConfig struct {
	// Grace is how long an order may be held in Redis without a row before it is taken for
	// hanging (its attempt died) and released. It must exceed any write's duration.
	Grace time.Duration
	// DriftAlert is the drift above which reconciliation logs a warning.
	DriftAlert int64
}

// Reconcile compares a flash voucher in Redis with the database and repairs Redis: hanging
// orders released, lost active rows put back, remaining and per-customer counts recounted
// (R1), a voucher Redis lost loaded again.
func (s *Service) Reconcile(ctx context.Context, code string, rc ReconcileConfig) (Reconciliation, error) {
	rep := Reconciliation{Code: code, Released: []string{}, PutBack: []string{}}
	began := time.Now().UnixNano()
	v, err := s.freshVoucher(ctx, code) // the database's definition, which the gate must hold
	if err != nil {
		return rep, err
	}
	if !v.FlashSale || s.gate == nil {
		return rep, nil
	}
	before, loaded, err := s.gate.Remaining(ctx, code)
	if err != nil {
		return rep, s.unavailable(err, "reconcile %s", code)
	}
	if !loaded {
		rep.Loaded = true
		if err := s.Warm(ctx, code); err != nil {
			return rep, err
		}
		// Redis had nothing to compare: the drift is of what was just loaded, not of the
		// zero uses left a missing key reads as
		if before, _, err = s.gate.Remaining(ctx, code); err != nil {
			return rep, s.unavailable(err, "reconcile %s", code)
		}
	}
	if err := s.syncDefinition(ctx, v); err != nil {
		return rep, err
	}
	// Redis first, then the database: an order taken in between shows as a row Redis
	// "lost", and putting it back is a no-op for an order Redis holds.
	holders, err := s.gate.Holders(ctx, code)
	if err != nil {
		return rep, s.unavailable(err, "reconcile %s", code)
	}
	active, err := s.store.ActiveRedemptions(ctx, code)
	if err != nil {
		return rep, s.unavailable(err, "reconcile %s", code)
	}
	rep.RemainingBefore = before
	rep.TotalLimit = v.TotalLimit

	if err := s.putBackLost(ctx, code, active, holders, &rep); err != nil {
		return rep, err
	}
	if err := s.releaseHanging(ctx, code, active, holders, rc.Grace, &rep); err != nil {
		return rep, err
	}
	// An order in flight (taken in Redis, its row not written yet) is no drift: a busy sale
	// always has some, and its write or its compensation settles it.
	rep.Expected = int64(v.TotalLimit-len(active)) - int64(rep.InFlight)
	rep.Drift = before - rep.Expected
	if err := s.recount(ctx, v, &rep); err != nil {
		return rep, err
	}
	if abs(rep.Drift) > rc.DriftAlert || rep.Recounted {
		s.cfg.Log.Warn("redis drifted from the database", "code", code, "drift", rep.Drift,
			"released", len(rep.Released), "putBack", len(rep.PutBack), "recounted", rep.Recounted)
	}
	s.trustVoucherSince(code, began) // its committed orders are all held again
	return rep, nil
}

// syncDefinition gives the gate v's definition, the database's, if it holds an older one, and
// has it repaired when it holds one the database never committed (repairGate). An edit whose
// own step in Redis failed, or a Redis that lost the definition, is put right here.
func (s *Service) syncDefinition(ctx context.Context, v Voucher) error {
	c, err := s.gate.Configure(ctx, v, ConfigureNewer)
	switch {
	case err != nil:
		return s.unavailable(err, "reconcile %s: give the gate revision %d", v.Code, v.Revision)
	case c.Applied:
		s.cfg.Log.Warn("the redis gate held an older definition; gave it the database's", "code", v.Code,
			"gateRevision", c.HeldRevision, "revision", v.Revision)
		s.notify.HoldersChanged(v.Code)
	case c.HeldRevision > v.Revision:
		if err := s.repairGate(ctx, v.Code); err != nil {
			return s.unavailable(err, "reconcile %s", v.Code)
		}
	}
	return nil
}

// putBackLost puts back in the gate the active rows it does not hold for their customers (R2):
// an order held for another customer (a take of the same orderId after Redis lost the row's)
// becomes the row's, or the row's retries would be refused as another customer's order. The
// rows were read before the put-back, so each is read again after it, as keepHeld does
// (takeBackReleased): a release committed in between found nothing to give back in Redis.
func (s *Service) putBackLost(ctx context.Context, code string, active []Redemption, holders map[string]Holder, rep *Reconciliation) error {
	var put []Redemption
	for _, r := range active {
		if h, ok := holders[r.OrderID]; ok && h.CustomerID == r.CustomerID {
			continue
		}
		ok, err := s.gate.PutBack(ctx, r)
		if err != nil {
			return s.unavailable(err, "reconcile %s", code)
		}
		if ok {
			put = append(put, r)
			rep.PutBack = append(rep.PutBack, r.OrderID)
		}
	}
	if len(put) > 0 {
		// a sold-out state published without them must be published again, as keepHeld does:
		// their retries would be turned away at the edges although they hold a use
		s.notify.HoldersChanged(code)
		s.takeBackReleased(ctx, code, put)
	}
	return nil
}

// releaseHanging gives back the uses of orders held in the gate with no active row once they
// are older than grace (the process that took them died before writing); younger ones are in
// flight.
func (s *Service) releaseHanging(ctx context.Context, code string, active []Redemption, holders map[string]Holder, grace time.Duration, rep *Reconciliation) error {
	inDB := make(map[string]bool, len(active))
	for _, r := range active {
		inDB[r.OrderID] = true
	}
	now := s.cfg.Clock.Now()
	for order, h := range holders {
		if inDB[order] {
			continue
		}
		if now.Sub(h.ReservedAt) < grace {
			rep.InFlight++
			continue
		}
		// Release only that holder: a newer attempt at the same order keeps its use.
		released, err := s.giveBack(ctx, code, order, &h)
		if err != nil {
			return s.unavailable(err, "reconcile %s", code)
		}
		if released {
			rep.Released = append(rep.Released, order)
		}
	}
	return nil
}

// recount restores R1 in the gate and tells the edges the state it leaves.
func (s *Service) recount(ctx context.Context, v Voucher, rep *Reconciliation) error {
	recount, err := s.gate.Recount(ctx, v)
	if err != nil {
		return s.unavailable(err, "reconcile %s", v.Code)
	}
	rep.RemainingAfter = recount.After
	s.counts.usesLeft.WithLabelValues(v.Code).Set(float64(max(recount.After, 0)))
	s.counts.showLimit(v)
	rep.Recounted = recount.UsersFixed || recount.Before != recount.After
	switch {
	case rep.RemainingAfter <= 0:
		s.notify.SoldOut(v.Code)
	case recount.Before <= 0:
		s.notify.BackInStock(v.Code) // the recount found uses a sold-out voucher had lost
	}
	return nil
}

// ReconcileAll reconciles every flash voucher that has not ended more than a day ago, and
// drops the gauges of the vouchers it no longer lists (forgetUnlisted).
func (s *Service) ReconcileAll(ctx context.Context, rc ReconcileConfig) ([]Reconciliation, error) {
	began := time.Now().UnixNano()
	shown := s.counts.shown() // before the list: a voucher created meanwhile is not dropped
	list, err := s.store.FlashVouchers(ctx, s.cfg.Clock.Now().Add(-24*time.Hour))
	if err != nil {
		return nil, s.unavailable(err, "reconcile")
	}
	s.forgetUnlisted(shown, list)
	reports := make([]Reconciliation, 0, len(list))
	var errs []error
	for _, v := range list {
		rep, err := s.Reconcile(ctx, v.Code, rc)
		if err != nil {
			errs = append(errs, fmt.Errorf("reconcile %s: %w", v.Code, err))
			continue
		}
		reports = append(reports, rep)
	}
	if len(errs) == 0 {
		s.trustGateSince(began) // every flash voucher agrees with the database again
	}
	return reports, errors.Join(errs...)
}

// forgetUnlisted drops the gauges of the codes shown that list lacks: a voucher deleted through
// another backend (the deleting one drops them at once, and no backend hears of it otherwise),
// or one that ended more than a day ago, leaves a backend's dashboard series at its next
// reconciliation instead of at its restart.
func (s *Service) forgetUnlisted(shown map[string]bool, list []Voucher) {
	for _, v := range list {
		delete(shown, v.Code)
	}
	for code := range shown {
		s.counts.forget(code)
	}
}

// WarmUpcoming loads into Redis every flash voucher that opens within ahead or is open now,
// so the first buyers do not wait for a load. It returns how many it loaded.
func (s *Service) WarmUpcoming(ctx context.Context, ahead time.Duration) (int, error) {
	now := s.cfg.Clock.Now()
	if s.gate == nil {
		return 0, nil
	}
	list, err := s.store.FlashVouchers(ctx, now)
	if err != nil {
		return 0, s.unavailable(err, "warm up")
	}
	n := 0
	var errs []error
	for _, v := range list {
		if v.StartsAt.After(now.Add(ahead)) {
			continue
		}
		s.remember(v)
		if _, loaded, err := s.gate.Remaining(ctx, v.Code); err != nil || loaded {
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := s.Warm(ctx, v.Code); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
