package api

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// listVouchers answers GET /admin/vouchers?limit=N&after=CODE&active=B&ended=B:
// wire.VoucherPage, vouchers ordered by code, limit (1–500, default 50) to a page, after the code
// after; active=true (false) keeps those active (paused), ended=true (false) those whose endsAt
// has passed (not yet). Each voucher is what GET /admin/vouchers/{code} answers but without
// redisRemaining: one Redis call per voucher is too much for a list (ask the voucher itself for
// it). A query parameter it does not take, or one given twice, is a 400 like a bad value, so
// that a misspelt filter is never ignored.
func (s *Server) listVouchers(ctx *fasthttp.RequestCtx) {
	f, limit, err := voucherQuery(ctx.QueryArgs())
	if err != nil {
		badRequest(ctx, err)
		return
	}
	c, cancel := s.context()
	defer cancel()
	page, more, err := s.vouchers.VoucherPage(c, f, limit)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	out := wire.VoucherPage{Vouchers: make([]wire.VoucherView, len(page))}
	for i, u := range page {
		out.Vouchers[i] = voucherView(u, s.vouchers.HoldTTL())
	}
	if more && len(page) > 0 {
		out.Next = page[len(page)-1].Code
	}
	respondJSON(ctx, fasthttp.StatusOK, &out)
}

// listRedemptions answers GET /admin/vouchers/{code}/redemptions?status=S&customerId=C&limit=N&after=ID:
// wire.RedemptionPage, the voucher's redemptions ordered by id, limit (1–500, default 50) to a
// page, after the id after (a decimal string, as next gives it). status (RESERVED, CONFIRMED,
// RELEASED or REFUNDED) and customerId (as stored, so 42 for the customer reserving with 42 or
// "42"; '+' must be sent as %2B) keep only the redemptions that match. An unknown voucher is a
// 404 VOUCHER_NOT_FOUND; a query parameter it does not take, or one given twice, is a 400.
func (s *Server) listRedemptions(ctx *fasthttp.RequestCtx, code string) {
	f, limit, err := redemptionQuery(ctx.QueryArgs())
	if err != nil {
		badRequest(ctx, err)
		return
	}
	c, cancel := s.context()
	defer cancel()
	page, more, err := s.vouchers.RedemptionPage(c, code, f, limit)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	out := wire.RedemptionPage{Redemptions: make([]wire.Redemption, len(page))}
	for i, r := range page {
		out.Redemptions[i] = wire.Redemption{OrderID: wire.ClientOrderID(r.OrderID), CustomerID: r.CustomerID,
			ByShopper: wire.ClientOrderID(r.OrderID) != r.OrderID, Status: r.Status,
			OrderAmount: r.OrderAmount, DiscountAmount: r.DiscountAmount, ReservedAt: r.ReservedAt,
			HoldExpiresAt: r.HoldExpiresAt, ConfirmedAt: r.ConfirmedAt, ReleasedAt: r.ReleasedAt, RefundedAt: r.RefundedAt}
	}
	if more && len(page) > 0 {
		out.Next = strconv.FormatInt(page[len(page)-1].ID, 10)
	}
	respondJSON(ctx, fasthttp.StatusOK, &out)
}

// voucherQuery reads and checks the query of a vouchers list.
func voucherQuery(args *fasthttp.Args) (voucher.VoucherFilter, int, error) {
	var f voucher.VoucherFilter
	q, err := readQuery(args, "limit", "after", "active", "ended")
	if err != nil {
		return f, 0, err
	}
	limit, err := pageLimit(q)
	if err != nil {
		return f, 0, err
	}
	if after, given := q["after"]; given {
		if f.After = wire.CanonicalCode(after); !wire.ValidCode(f.After) {
			return f, 0, errors.New("after must be a voucher code (^[A-Za-z0-9_-]{1,32}$): the last code of the previous page")
		}
	}
	for _, b := range []struct {
		name string
		dst  **bool
	}{{"active", &f.Active}, {"ended", &f.Ended}} {
		v, given := q[b.name]
		if !given {
			continue
		}
		if v != "true" && v != "false" {
			return f, 0, fmt.Errorf("%s %q must be true or false", b.name, clip(v))
		}
		on := v == "true"
		*b.dst = &on
	}
	return f, limit, nil
}

// redemptionQuery reads and checks the query of a redemptions list.
func redemptionQuery(args *fasthttp.Args) (voucher.RedemptionFilter, int, error) {
	var f voucher.RedemptionFilter
	q, err := readQuery(args, "limit", "after", "status", "customerId")
	if err != nil {
		return f, 0, err
	}
	limit, err := pageLimit(q)
	if err != nil {
		return f, 0, err
	}
	if after, given := q["after"]; given {
		if f.After, err = strconv.ParseInt(after, 10, 64); err != nil || f.After < 1 {
			return f, 0, fmt.Errorf("after %q must be a positive integer: the id the previous page gave as next", clip(after))
		}
	}
	if status, given := q["status"]; given {
		switch status {
		case wire.StatusReserved, wire.StatusConfirmed, wire.StatusReleased, wire.StatusRefunded:
			f.Status = status
		default:
			return f, 0, fmt.Errorf("status %q must be %s, %s, %s or %s", clip(status),
				wire.StatusReserved, wire.StatusConfirmed, wire.StatusReleased, wire.StatusRefunded)
		}
	}
	if customer, given := q["customerId"]; given {
		// the rule the reservation decoder holds a customerId to: no stored customer breaks it
		if err := wire.CheckID("customerId", customer, wire.MaxCustomerLen); err != nil {
			return f, 0, err
		}
		f.CustomerID = customer
	}
	return f, limit, nil
}

// readQuery returns the query's parameters by name: each of names at most once, and no other.
func readQuery(args *fasthttp.Args, names ...string) (map[string]string, error) {
	q := make(map[string]string, args.Len())
	for k, v := range args.All() {
		name := string(k)
		switch _, seen := q[name]; {
		case seen:
			return nil, fmt.Errorf("query parameter %q is given more than once", clip(name))
		case !slices.Contains(names, name):
			return nil, fmt.Errorf("unknown query parameter %q; this list takes %s", clip(name), strings.Join(names, ", "))
		}
		q[name] = string(v)
	}
	return q, nil
}

// pageLimit reads the limit of a page: 1 to wire.MaxPageLimit, wire.DefaultPageLimit if not given.
func pageLimit(q map[string]string) (int, error) {
	v, given := q["limit"]
	if !given {
		return wire.DefaultPageLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > wire.MaxPageLimit {
		return 0, fmt.Errorf("limit %q must be an integer from 1 to %d", clip(v), wire.MaxPageLimit)
	}
	return n, nil
}

// voucherView is the wire form of a voucher with its counts; holdTTL is the service's hold time,
// shown for a voucher without its own.
func voucherView(u voucher.Usage, holdTTL time.Duration) wire.VoucherView {
	if u.HoldTTL > 0 {
		holdTTL = u.HoldTTL
	}
	return wire.VoucherView{
		Code: u.Code, DiscountAmount: u.DiscountAmount, DiscountPercent: u.DiscountPercent,
		MaxDiscountAmount: u.MaxDiscountAmount, MinOrderAmount: u.MinOrderAmount,
		TotalLimit: u.TotalLimit, PerUserLimit: u.PerUserLimit, StartsAt: u.StartsAt, EndsAt: u.EndsAt,
		FlashSale: u.FlashSale, Active: !u.Paused, HoldTTL: holdTTL.String(), Revision: u.Revision,
		UsedCount: u.UsedCount, Counts: u.ByStatus, RedisRemaining: u.RedisRemaining,
	}
}
