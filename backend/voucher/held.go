package voucher

import "context"

// keepHeld puts back in the gate those of rs, active rows of code, that it does not hold, so
// that every active row is in Redis (R2). A load that read the database just before a write
// committed leaves that order out (Redis restarted empty, or failed over and lost it, while the
// write was in flight); its retries would then be refused although it holds a use. The writer
// runs this after each batch commits, before answering, and Warm after each load. A failure is
// logged: the reconciler puts the orders back later.
func (s *Service) keepHeld(ctx context.Context, code string, rs []Redemption) {
	if len(rs) == 0 {
		return
	}
	ids := make([]string, len(rs))
	byID := make(map[string]Redemption, len(rs))
	for i, r := range rs {
		ids[i] = r.OrderID
		byID[r.OrderID] = r
	}
	missing, err := s.gate.Missing(ctx, code, ids)
	if err != nil {
		s.cfg.Log.Warn("check written orders are held in redis; the reconciler will put back any lost",
			"code", code, "err", err)
		return
	}
	put := 0
	for _, id := range missing {
		ok, err := s.gate.PutBack(ctx, byID[id])
		if err != nil {
			s.cfg.Log.Warn("put back a written order redis lost; the reconciler will", "code", code, "order", id, "err", err)
			return
		}
		if ok {
			put++
		}
	}
	if put > 0 {
		s.cfg.Log.Warn("put back written orders redis did not hold", "code", code, "orders", put)
		s.notify.HoldersChanged(code)
	}
}
