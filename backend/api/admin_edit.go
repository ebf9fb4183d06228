package api

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// editVoucher answers PATCH /admin/vouchers/{code}: the voucher as the edit leaves it (200), or
// 400 naming what is wrong with the body (nothing changed), 404, 409 LIMIT_BELOW_USED, 503.
func (s *Server) editVoucher(ctx *fasthttp.RequestCtx, code string) {
	e, err := decodeVoucherPatch(ctx.PostBody())
	if err != nil {
		badRequest(ctx, err)
		return
	}
	c, cancel := s.context()
	defer cancel()
	if _, err := s.vouchers.Edit(c, code, e); err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	s.getVoucher(ctx, code)
}

// deleteVoucher answers DELETE /admin/vouchers/{code}: 204 for a voucher never redeemed, 409
// VOUCHER_IN_USE for one with redemptions, 404.
func (s *Server) deleteVoucher(ctx *fasthttp.RequestCtx, code string) {
	c, cancel := s.context()
	defer cancel()
	if err := s.vouchers.Delete(c, code); err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// listChanges answers GET /admin/vouchers/{code}/changes?limit=N&after=REVISION: the voucher's
// changes by revision, a page at a time (limit 1–500, default 50); 404 for an unknown voucher;
// 400 for a parameter it does not take, given twice, or bad.
func (s *Server) listChanges(ctx *fasthttp.RequestCtx, code string) {
	q, err := readQuery(ctx.QueryArgs(), "limit", "after")
	if err != nil {
		badRequest(ctx, err)
		return
	}
	limit, err := pageLimit(q)
	if err != nil {
		badRequest(ctx, err)
		return
	}
	var after int64
	if a, given := q["after"]; given {
		if after, err = strconv.ParseInt(a, 10, 64); err != nil || after < 1 {
			badRequest(ctx, fmt.Errorf("after %q must be a positive integer: the revision the previous page gave as next", clip(a)))
			return
		}
	}
	c, cancel := s.context()
	defer cancel()
	page, more, err := s.vouchers.ChangePage(c, code, after, limit)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	out := wire.VoucherChanges{Changes: make([]wire.VoucherChange, len(page))}
	for i, ch := range page {
		out.Changes[i] = wire.VoucherChange{Revision: ch.Revision, ChangedAt: ch.At, Before: ch.Before, After: ch.After}
	}
	if more && len(page) > 0 {
		out.Next = strconv.FormatInt(page[len(page)-1].Revision, 10)
	}
	respondJSON(ctx, fasthttp.StatusOK, &out)
}

// patchFields are the fields a PATCH takes, for the message of one that names none.
const patchFields = "discountAmount, discountPercent, maxDiscountAmount, minOrderAmount, totalLimit, perUserLimit, startsAt, endsAt, active, holdTtl"

// decodeVoucherPatch decodes and checks the body of a PATCH: one JSON object of patchFields,
// unknown fields refused (a misspelt one must not be a change quietly not made), each field in
// its bounds, null only where it means something (no cap; back to VG_HOLD_TTL). What depends on
// the voucher as it stands (endsAt after startsAt once applied, a cap on a fixed discount) is
// the service's to check.
func decodeVoucherPatch(body []byte) (voucher.Edit, error) {
	var e voucher.Edit
	var p wire.VoucherPatch
	if err := decodeJSON(body, &p, strict); err != nil {
		return e, err
	}
	switch {
	case p.Code.Set:
		return e, errors.New("code cannot change: a voucher keeps its code (create another one)")
	case p.FlashSale.Set:
		return e, errors.New("flashSale cannot change once a voucher is created")
	}
	var errs []error
	e.DiscountAmount = given(&errs, "discountAmount", p.DiscountAmount)
	e.DiscountPercent = given(&errs, "discountPercent", p.DiscountPercent)
	e.MinOrderAmount = given(&errs, "minOrderAmount", p.MinOrderAmount)
	e.TotalLimit = given(&errs, "totalLimit", p.TotalLimit)
	e.PerUserLimit = given(&errs, "perUserLimit", p.PerUserLimit)
	e.Active = given(&errs, "active", p.Active)
	startsAt, endsAt := given(&errs, "startsAt", p.StartsAt), given(&errs, "endsAt", p.EndsAt)
	if err := errors.Join(errs...); err != nil {
		return e, err
	}
	if p.MaxDiscountAmount.Set {
		if p.MaxDiscountAmount.Null {
			e.NoMaxDiscount = true
		} else {
			e.MaxDiscountAmount = &p.MaxDiscountAmount.Value
		}
	}
	if p.HoldTTL.Set {
		var ttl time.Duration // null: back to VG_HOLD_TTL
		if !p.HoldTTL.Null {
			var err error
			if ttl, err = parseHoldTTL(p.HoldTTL.Value); err != nil {
				return e, err
			}
		}
		e.HoldTTL = &ttl
	}
	var err error
	if e.StartsAt, err = patchTime("startsAt", startsAt); err != nil {
		return e, err
	}
	if e.EndsAt, err = patchTime("endsAt", endsAt); err != nil {
		return e, err
	}
	switch {
	case e == voucher.Edit{}:
		return e, errors.New("the body changes nothing; it takes " + patchFields)
	case e.DiscountAmount != nil && e.DiscountPercent != nil:
		return e, errors.New("discountAmount and discountPercent exclude each other: send one")
	case e.DiscountAmount != nil && e.MaxDiscountAmount != nil:
		return e, errors.New("maxDiscountAmount caps a percentage; it goes with discountPercent, not discountAmount")
	case e.StartsAt != nil && e.EndsAt != nil && !e.EndsAt.After(*e.StartsAt):
		return e, errors.New("endsAt must be after startsAt")
	}
	return e, checkLimits(e.DiscountAmount, e.DiscountPercent, e.MaxDiscountAmount, e.MinOrderAmount, e.TotalLimit, e.PerUserLimit)
}

// given is the value of a field that may be missing but not null: nil when missing; a null is
// noted in errs.
func given[T any](errs *[]error, name string, f wire.Field[T]) *T {
	switch {
	case !f.Set:
		return nil
	case f.Null:
		*errs = append(*errs, fmt.Errorf("%s must not be null", name))
		return nil
	}
	v := f.Value
	return &v
}

// patchTime parses a time of a PATCH, nil when not given.
func patchTime(name string, s *string) (*time.Time, error) {
	if s == nil {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil {
		return nil, fmt.Errorf("%s %q must be an RFC 3339 time such as 2026-12-02T10:00:00Z", name, clip(*s))
	}
	return &t, nil
}

// parseHoldTTL reads a hold time: a Go duration ("90s", "15m", "1h30m") of whole milliseconds
// from wire.MinHoldTTL to wire.MaxHoldTTL.
func parseHoldTTL(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil || strings.TrimSpace(s) != s:
		return 0, fmt.Errorf("holdTtl %q must be a duration such as \"10m\" or \"90s\"", clip(s))
	case d < wire.MinHoldTTL || d > wire.MaxHoldTTL:
		return 0, fmt.Errorf("holdTtl %q must be from %v to %v", clip(s), wire.MinHoldTTL, wire.MaxHoldTTL)
	case d%time.Millisecond != 0:
		return 0, fmt.Errorf("holdTtl %q must be whole milliseconds", clip(s))
	}
	return d, nil
}

// checkLimits checks the bounds of a voucher's numbers, those given (nil: not given), for a
// voucher to create and for an edit alike.
func checkLimits(discount *int64, percent *int, maxDiscount, minOrder *int64, total, perUser *int) error {
	switch {
	case discount != nil && *discount < 0:
		return errors.New("discountAmount must not be negative")
	case percent != nil && (*percent < 1 || *percent > wire.MaxPercent):
		return fmt.Errorf("discountPercent must be from 1 to %d", wire.MaxPercent)
	case maxDiscount != nil && *maxDiscount < 0:
		return errors.New("maxDiscountAmount must not be negative")
	case minOrder != nil && *minOrder < 0:
		return errors.New("minOrderAmount must not be negative")
	case total != nil && (*total < 0 || *total > wire.MaxTotalLimit):
		return fmt.Errorf("totalLimit must be between 0 and %d", wire.MaxTotalLimit)
	case perUser != nil && (*perUser < 1 || *perUser > wire.MaxPerUserLimit):
		return fmt.Errorf("perUserLimit must be between 1 and %d", wire.MaxPerUserLimit)
	}
	return nil
}
