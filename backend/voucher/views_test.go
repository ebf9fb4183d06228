package voucher_test

import (
	"context"
	"errors"
	"testing"

	"vouchergate/backend/voucher"
)

// viewsStore is the fake store with Views that answer what the test says.
type viewsStore struct {
	*fakeStore
	page []voucher.RedemptionRecord
	err  error
}

func (v viewsStore) VoucherPage(context.Context, voucher.VoucherFilter, int) ([]voucher.Usage, bool, error) {
	return nil, false, v.err
}

func (v viewsStore) ChangePage(context.Context, string, int64, int) ([]voucher.Change, bool, error) {
	return nil, false, v.err
}

func (v viewsStore) RedemptionPage(context.Context, string, voucher.RedemptionFilter, int) ([]voucher.RedemptionRecord, bool, error) {
	return v.page, v.page != nil, v.err
}

// The service reads the lists from the store's Views: an unknown voucher is ErrVoucherNotFound
// before any list is read, and a store without Views or a failing one is ErrUnavailable.
func TestViewsOutcomes(t *testing.T) {
	one := []voucher.RedemptionRecord{{ID: 7}}
	for _, c := range []struct {
		name     string
		views    *viewsStore // nil: the fake store alone, without Views
		code     string
		wantErr  error
		wantPage int
	}{
		{name: "unknown voucher", code: "NOSUCH", wantErr: voucher.ErrVoucherNotFound},
		{name: "unknown voucher with views", views: &viewsStore{page: one}, code: "NOSUCH", wantErr: voucher.ErrVoucherNotFound},
		{name: "no views", code: "V", wantErr: voucher.ErrUnavailable},
		{name: "views fail", views: &viewsStore{err: errors.New("connection reset")}, code: "V", wantErr: voucher.ErrUnavailable},
		{name: "a page", views: &viewsStore{page: one}, code: "V", wantPage: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeEnv(voucher.Config{})
			f.create(t, "V", 5, 1, false)
			svc := f.svc
			if c.views != nil {
				c.views.fakeStore = f.store
				svc = voucher.NewService(*c.views, f.gate, f.note, f.cfg)
			}
			page, more, err := svc.RedemptionPage(context.Background(), c.code, voucher.RedemptionFilter{}, 10)
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) || len(page) != c.wantPage || more != (c.wantPage > 0) {
				t.Errorf("redemptions of %s: %v, more %v, %v; want %d rows, %v", c.code, page, more, err, c.wantPage, c.wantErr)
			}
			if c.code == "V" && c.wantErr != nil {
				if _, _, err := svc.VoucherPage(context.Background(), voucher.VoucherFilter{}, 10); !errors.Is(err, voucher.ErrUnavailable) {
					t.Errorf("vouchers: %v; want %v", err, voucher.ErrUnavailable)
				}
			}
		})
	}
}
