package voucher

import (
	"context"
	"errors"
	"log/slog"
)

// keepHeld puts back in the gate those of rs, active rows of code, that it does not hold for
// their customers, so that every active row is in Redis as its own (R2). A load that read the
// database just before a write committed leaves that order out (Redis restarted empty, or
// failed over and lost it, while the write was in flight); its retries would then be refused
// although it holds a use. Another customer may even have taken that orderId in Redis since:
// the put-back makes that use the row's, for the other take can never be written. The writer
// runs this after each batch commits, before answering, and Warm after each load.
//
// A failure does not take back the rows' answers: each row is committed, so its 201 is true
// (D4). It is logged and makes the voucher suspect (suspect.go) until the reconciler has put the
// orders back, so that meanwhile a granted order's retry the gate refuses for lack of uses is
// answered from its row, not OUT_OF_STOCK.
func (s *Service) keepHeld(ctx context.Context, code string, rs []Redemption) {
	if len(rs) == 0 {
		return
	}
	missing, err := s.gate.Missing(ctx, code, rs)
	if err != nil {
		s.suspectVoucher(code)
		s.logRepeated(slog.LevelWarn, "check written orders are held in redis; the reconciler will put back any lost",
			"code", code, "err", err)
		return
	}
	var put []Redemption
	for _, r := range missing {
		ok, err := s.gate.PutBack(ctx, r)
		if err != nil {
			s.suspectVoucher(code)
			s.logRepeated(slog.LevelWarn, "put back a written order redis lost; the reconciler will", "code", code, "order", r.OrderID, "err", err)
			break
		}
		if ok {
			put = append(put, r)
		}
	}
	if len(put) > 0 {
		s.cfg.Log.Warn("put back written orders redis did not hold", "code", code, "orders", len(put))
		s.notify.HoldersChanged(code)
		s.takeBackReleased(ctx, code, put)
	}
}

// keepHeldNow is keepHeld for one redemption, with its own deadline.
func (s *Service) keepHeldNow(code string, r Redemption) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DBTimeout)
	defer cancel()
	s.keepHeld(ctx, code, []Redemption{r})
}

// takeBackReleased gives back the uses just put back for rows that are no longer active. The
// rows were read before they were put back, and a release in between (the database first, then
// the gate, which found nothing to give back) would leave its use held with no row until
// reconciliation. Reading each row again after the put-back closes that: a release whose
// database write came earlier is seen here, and one whose write comes later gives the use back
// itself.
func (s *Service) takeBackReleased(ctx context.Context, code string, put []Redemption) {
	for _, r := range put {
		row, err := s.store.Redemption(ctx, r.OrderID)
		switch {
		case err == nil && row.Active() && row.VoucherCode == code && row.CustomerID == r.CustomerID:
			continue
		case err != nil && !errors.Is(err, ErrReservationNotFound):
			s.cfg.Log.Warn("read a put-back order again; the reconciler will check it", "code", code, "order", r.OrderID, "err", err)
			continue
		}
		s.giveBackLoaded(ctx, code, []Redemption{r})
	}
}

// giveBackLoaded gives back the uses that a load or a put-back held for rs, rows released
// since they were read, and returns how many went back. Each is given back only while the gate
// holds it as that row's (LoadedAttempt, the row's customer and reservation time): a use some
// attempt took since for the same orderId is that attempt's to give back. A failure leaves the
// use held for the reconciler.
func (s *Service) giveBackLoaded(ctx context.Context, code string, rs []Redemption) (released int64) {
	for _, r := range rs {
		held := Holder{CustomerID: r.CustomerID, ReservedAt: r.ReservedAt, Attempt: LoadedAttempt}
		ok, err := s.giveBack(ctx, code, r.OrderID, &held)
		if err != nil {
			s.cfg.Log.Warn("give back a loaded order released meanwhile; the reconciler will", "code", code, "order", r.OrderID, "err", err)
			continue
		}
		if ok {
			released++
		}
	}
	return released
}
