package voucher

import (
	"context"
	"errors"
	"time"
)

// Views reads the admin API's lists, a page at a time, in key order. It is its own port, apart
// from Store, so that the deciding code and its fakes do not depend on it. Implementations MUST
// be safe for concurrent use, MUST read each page in one snapshot (its counts agree with its
// used_count as of one moment), and MUST find a page's rows by key (the code; the voucher and
// customer), never by reading every row of the table.
type Views interface {
	// VoucherPage returns up to limit (≥ 1) vouchers that match f, whose code sorts after
	// f.After ("" for the first page), ordered by code, each with its used_count and its
	// redemptions counted by status (RedisRemaining nil), and whether more follow them.
	VoucherPage(ctx context.Context, f VoucherFilter, limit int) (page []Usage, more bool, err error)
	// ChangePage returns up to limit (≥ 1) changes of the voucher code with revisions above
	// after, ordered by revision, and whether more follow them.
	ChangePage(ctx context.Context, code string, after int64, limit int) (page []Change, more bool, err error)
	// RedemptionPage returns up to limit (≥ 1) redemptions of the voucher code that match f,
	// ordered by id, and whether more follow them. It does not check that the voucher exists: a
	// code no voucher has lists nothing.
	RedemptionPage(ctx context.Context, code string, f RedemptionFilter, limit int) (page []RedemptionRecord, more bool, err error)
}

// VoucherFilter chooses the vouchers of a page: codes after After, and when set only those
// active (or paused), and only those ended at Now (or not).
type VoucherFilter struct {
	After  string
	Active *bool
	Ended  *bool
	Now    time.Time // when Ended is set; the service sets it
}

// Change is one edit of a voucher: the revision it made, when, and the fields it changed (by
// the admin API's names) before and after.
type Change struct {
	Revision      int64
	At            time.Time
	Before, After map[string]any
}

// RedemptionFilter chooses the redemptions of a page: ids after After (0 for the first page),
// and when set the status and the customer (as stored).
type RedemptionFilter struct {
	After      int64
	Status     string // "" for any; else wire.StatusReserved, StatusConfirmed, StatusReleased or StatusRefunded
	CustomerID string // "" for any
}

// RedemptionRecord is a redemption with what only the admin lists show: its id (the lists' key)
// and when it was confirmed or released.
type RedemptionRecord struct {
	ID int64
	Redemption
	ConfirmedAt *time.Time
	ReleasedAt  *time.Time
	RefundedAt  *time.Time
}

// errNoViews is why the lists are unavailable over a store that does not implement Views.
var errNoViews = errors.New("the store does not implement Views")

// VoucherPage returns a page of vouchers ordered by code with their counts, without Redis's
// remaining uses: one Redis call per voucher is too much for a list.
func (s *Service) VoucherPage(ctx context.Context, f VoucherFilter, limit int) ([]Usage, bool, error) {
	if s.views == nil {
		return nil, false, s.unavailable(errNoViews, "list vouchers")
	}
	f.Now = s.cfg.Clock.Now()
	page, more, err := s.views.VoucherPage(ctx, f, limit)
	if err != nil {
		return nil, false, s.unavailable(err, "list vouchers after %q", f.After)
	}
	return page, more, nil
}

// ChangePage returns a page of the voucher's changes ordered by revision; ErrVoucherNotFound
// when no voucher has code.
func (s *Service) ChangePage(ctx context.Context, code string, after int64, limit int) ([]Change, bool, error) {
	if _, err := s.voucher(ctx, code); err != nil {
		return nil, false, s.unavailable(err, "list changes of %s: read voucher", code)
	}
	if s.views == nil {
		return nil, false, s.unavailable(errNoViews, "list changes of %s", code)
	}
	page, more, err := s.views.ChangePage(ctx, code, after, limit)
	if err != nil {
		return nil, false, s.unavailable(err, "list changes of %s", code)
	}
	return page, more, nil
}

// RedemptionPage returns a page of the voucher's redemptions ordered by id; ErrVoucherNotFound
// when no voucher has code (an empty page is a voucher without matching redemptions).
func (s *Service) RedemptionPage(ctx context.Context, code string, f RedemptionFilter, limit int) ([]RedemptionRecord, bool, error) {
	if _, err := s.voucher(ctx, code); err != nil {
		return nil, false, s.unavailable(err, "list redemptions of %s: read voucher", code)
	}
	if s.views == nil {
		return nil, false, s.unavailable(errNoViews, "list redemptions of %s", code)
	}
	page, more, err := s.views.RedemptionPage(ctx, code, f, limit)
	if err != nil {
		return nil, false, s.unavailable(err, "list redemptions of %s", code)
	}
	return page, more, nil
}

// viewsOf returns the store's Views, if it has them: the PostgreSQL store does; the fakes of the
// deciding tests need not.
func viewsOf(store Store) Views {
	v, _ := store.(Views)
	return v
}
