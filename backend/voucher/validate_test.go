package voucher_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"vouchergate/backend/voucher"
)

// readOnly are the fakes' methods that change nothing: a dry run may call only these.
var readOnly = []string{"Voucher", "Lookup", "LookupCustomer", "Redemption", "Peek", "Holding", "Remaining",
	"Holders", "Missing", "Stats", "ActiveRedemptions", "FlashVouchers"}

// Validate answers what Reserve then answers, calling only reading methods, for both paths.
func TestValidateAgreesWithReserve(t *testing.T) {
	warm := func(code string) func(*testing.T, *fakeEnv) {
		return func(t *testing.T, f *fakeEnv) { f.warm(t, code) }
	}
	cases := []struct {
		name           string
		total, perUser int
		shape          func(*voucher.Voucher)
		before         func(t *testing.T, f *fakeEnv) // the voucher is "V"
		amount         int64                          // 100 unless set
		want           error
		discount       int64
	}{
		{name: "grants", total: 2, perUser: 1, discount: 30},
		{name: "below the minimum", total: 2, perUser: 1, amount: 49, want: voucher.ErrNotEligible},
		{name: "not open yet", total: 2, perUser: 1, want: voucher.ErrNotEligible,
			shape: func(v *voucher.Voucher) { v.StartsAt = v.EndsAt.Add(-time.Hour) }},
		{name: "sold out", total: 1, perUser: 1, want: voucher.ErrOutOfStock,
			before: func(t *testing.T, f *fakeEnv) { f.mustReserve(t, "V", "c0", "o0") }},
		{name: "customer at the limit", total: 3, perUser: 1, want: voucher.ErrAlreadyUsed,
			before: func(t *testing.T, f *fakeEnv) { f.mustReserve(t, "V", "c1", "o0") }},
		{name: "a granted order: its discount again", total: 1, perUser: 1, amount: 60, discount: 30,
			before: func(t *testing.T, f *fakeEnv) { f.mustReserve(t, "V", "c1", "o1") }},
		{name: "a granted order after the voucher ended", total: 1, perUser: 1, discount: 30,
			before: func(t *testing.T, f *fakeEnv) {
				f.mustReserve(t, "V", "c1", "o1")
				f.clock.Advance(48 * time.Hour)
			}},
		{name: "a granted order after its start was postponed and it was paused", total: 2, perUser: 1, discount: 30,
			before: func(t *testing.T, f *fakeEnv) {
				f.mustReserve(t, "V", "c1", "o1")
				postpone(t, f, "V", true)
			}},
		{name: "a new order after the start was postponed", total: 2, perUser: 2, want: voucher.ErrNotEligible,
			before: func(t *testing.T, f *fakeEnv) {
				f.mustReserve(t, "V", "c1", "o0")
				postpone(t, f, "V", false)
			}},
		{name: "order of another customer", total: 3, perUser: 1, want: voucher.ErrAlreadyUsed,
			before: func(t *testing.T, f *fakeEnv) { f.mustReserve(t, "V", "c2", "o1") }},
		{name: "released order", total: 3, perUser: 1, want: voucher.ErrReleased, before: releasedBefore("V")},
		{name: "order on another voucher", total: 3, perUser: 1, want: voucher.ErrAlreadyUsed,
			before: func(t *testing.T, f *fakeEnv) {
				f.create(t, "M", 1, 1, false)
				f.commit(t, "M", "c1", "o1")
			}},
	}
	for _, flash := range []bool{false, true} {
		for _, c := range cases {
			name := "normal/" + c.name
			if flash {
				name = "flash/" + c.name
			}
			t.Run(name, func(t *testing.T) {
				f := newFakeEnv(voucher.Config{HoldTTL: 10 * time.Minute})
				f.create(t, "V", c.total, c.perUser, flash, c.shape)
				if flash && (c.shape == nil) {
					warm("V")(t, f)
				}
				if c.before != nil {
					c.before(t, f)
				}
				req := voucher.Request{Code: "V", CustomerID: "c1", OrderID: "o1", OrderAmount: or(c.amount, 100)}
				notes := f.note.count()
				var writes []string
				f.store.hook = func(op string, _ []string) {
					if !slices.Contains(readOnly, op) {
						writes = append(writes, "store."+op)
					}
				}
				f.gate.hook = func(op, _ string) {
					if !slices.Contains(readOnly, op) {
						writes = append(writes, "gate."+op)
					}
				}
				got, err := f.svc.Validate(context.Background(), req)
				f.store.hook, f.gate.hook = nil, nil
				if len(writes) > 0 {
					t.Errorf("validate called %v; want reads only", writes)
				}
				if told := f.note.since(notes); len(told) > 0 {
					t.Errorf("validate told the edges %v; want nothing", told)
				}
				if !sameAnswer(got, err, c.want, c.discount) {
					t.Fatalf("validate = %+v, %v; want %v (discount %d)", got, err, c.want, c.discount)
				}
				r, rerr := f.svc.Reserve(context.Background(), req)
				if !sameAnswer(r, rerr, c.want, c.discount) {
					t.Fatalf("reserve after validate = %+v, %v; validate said %+v, %v", r, rerr, got, err)
				}
			})
		}
	}
}

// Validate of a flash voucher Redis lacks answers from the database, loading nothing.
func TestValidateFlashNotLoaded(t *testing.T) {
	f := newFakeEnv(voucher.Config{})
	f.create(t, "F", 1, 1, true)
	f.commit(t, "F", "c0", "o0")
	_, err := f.svc.Validate(context.Background(), voucher.Request{Code: "F", CustomerID: "c1", OrderID: "o1", OrderAmount: 100})
	if !errors.Is(err, voucher.ErrOutOfStock) {
		t.Fatalf("validate = %v; want out of stock", err)
	}
	if _, loaded, _ := f.gate.Remaining(context.Background(), "F"); loaded {
		t.Fatal("validate loaded the voucher into the gate")
	}
}

func sameAnswer(r voucher.Redemption, err, want error, discount int64) bool {
	if want != nil {
		return errors.Is(err, want)
	}
	return err == nil && r.DiscountAmount == discount
}
