package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/voucher"
	"vouchergate/shared/wire"
)

// reservation reads a reservation's body (reserve's and validate's) and checks it against the
// caller's shopper, whose orderId it puts in the shopper's scope (subject.go); it answers 400 or
// 403 and returns false when the request may not go on.
func (s *Server) reservation(ctx *fasthttp.RequestCtx, p params) (voucher.Request, bool) {
	req, err := decodeReserve(ctx.PostBody())
	if err != nil {
		badRequest(ctx, err)
		return voucher.Request{}, false
	}
	customer := string(req.CustomerID)
	if !s.shopperMayReserve(ctx, p.shopper, customer) {
		return voucher.Request{}, false
	}
	order := req.OrderID
	if p.shopper != nil {
		order = wire.ShopperOrderID(customer, order)
	}
	return voucher.Request{Code: p.code, CustomerID: customer, OrderID: order, OrderAmount: *req.OrderAmount}, true
}

func (s *Server) reserve(ctx *fasthttp.RequestCtx, p params) {
	req, ok := s.reservation(ctx, p)
	if !ok {
		return
	}
	c, cancel := s.context()
	defer cancel()
	r, err := s.vouchers.Reserve(c, req)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	respondJSON(ctx, fasthttp.StatusCreated, wire.ReserveResponse{OrderID: wire.ClientOrderID(r.OrderID), DiscountAmount: r.DiscountAmount})
}

// validate answers POST /vouchers/{code}/validate, a dry run of a reservation with its body,
// decoded and checked as the reservation's: 200 wire.ValidateResponse, valid with the discount
// or not valid with the code the reservation would be refused with (a refusal is an answer to
// the question, so 200, not the reservation's 409/422); 400, 404 and 503 as a reservation.
func (s *Server) validate(ctx *fasthttp.RequestCtx, p params) {
	req, ok := s.reservation(ctx, p)
	if !ok {
		return
	}
	c, cancel := s.context()
	defer cancel()
	r, err := s.vouchers.Validate(c, req)
	if err == nil {
		respondJSON(ctx, fasthttp.StatusOK, wire.ValidateResponse{Valid: true, DiscountAmount: &r.DiscountAmount})
		return
	}
	if refused, reason, ok := refusal(err); ok {
		respondJSON(ctx, fasthttp.StatusOK, wire.ValidateResponse{Error: refused, Reason: reason})
		return
	}
	s.respondOutcome(ctx, err)
}

func (s *Server) confirm(ctx *fasthttp.RequestCtx, p params) {
	s.changeReservation(ctx, p, s.vouchers.Confirm)
}

func (s *Server) release(ctx *fasthttp.RequestCtx, p params) {
	s.changeReservation(ctx, p, s.vouchers.Release)
}

// refund answers POST /vouchers/{code}/reservations/{orderId}/refund: a confirmed order's use
// given back, 200 {orderId, status: REFUNDED} (again: the same).
func (s *Server) refund(ctx *fasthttp.RequestCtx, p params) {
	s.changeReservation(ctx, p, s.vouchers.Refund)
}

// changeReservation confirms, releases or refunds (change) the order's reservation and answers
// its status. A shopper's order is its own (subject.go); a service names a shopper's order by its
// orderId, and by ?customerId= when several shoppers reserved that orderId.
func (s *Server) changeReservation(ctx *fasthttp.RequestCtx, p params,
	change func(ctx context.Context, code, orderID string) (voucher.Redemption, error)) {
	if !checkOrderID(ctx, p.order) {
		return
	}
	owner, ok := s.orderOwner(ctx, p)
	if !ok {
		return
	}
	c, cancel := s.context()
	defer cancel()
	stored, err := s.vouchers.StoredOrder(c, p.code, p.order, owner)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	r, err := change(c, p.code, stored)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	respondJSON(ctx, fasthttp.StatusOK, wire.ReservationStatus{OrderID: p.order, Status: r.Status})
}

// orderOwner is the customer whose order a confirm or release names: the shopper, or the
// ?customerId= a service may add ("" when it adds none). It answers 400 for a bad customerId.
func (s *Server) orderOwner(ctx *fasthttp.RequestCtx, p params) (string, bool) {
	if p.shopper != nil {
		return p.shopper.Subject, true
	}
	owner := ctx.QueryArgs().Peek("customerId")
	if owner == nil {
		return "", true
	}
	if err := wire.CheckID("customerId", string(owner), wire.MaxCustomerLen); err != nil {
		badRequest(ctx, err)
		return "", false
	}
	return string(owner), true
}

// state answers the voucher's sold-out state with its holders, for an edge that learned of a
// sell-out from a passing 409 while NATS was away.
func (s *Server) state(ctx *fasthttp.RequestCtx, code string) {
	c, cancel := s.context()
	defer cancel()
	st, err := s.opts.Vouchers.SoldOutState(c, code)
	if err != nil {
		s.respondOutcome(ctx, err)
		return
	}
	respondJSON(ctx, fasthttp.StatusOK, st)
}

func checkOrderID(ctx *fasthttp.RequestCtx, orderID string) bool {
	if err := wire.CheckID("orderId", orderID, wire.MaxOrderIDLen); err != nil {
		badRequest(ctx, err)
		return false
	}
	return true
}

// decodeReserve decodes and checks a reservation body.
func decodeReserve(body []byte) (wire.ReserveRequest, error) {
	var req wire.ReserveRequest
	if err := decodeJSON(body, &req, lenient); err != nil {
		return req, err
	}
	if err := wire.CheckID("customerId", string(req.CustomerID), wire.MaxCustomerLen); err != nil {
		return req, err
	}
	if err := wire.CheckID("orderId", req.OrderID, wire.MaxOrderIDLen); err != nil {
		return req, err
	}
	switch {
	case req.OrderAmount == nil:
		return req, errors.New("orderAmount is required")
	case *req.OrderAmount < 0:
		return req, fmt.Errorf("orderAmount is %d; it must not be negative", *req.OrderAmount)
	}
	return req, nil
}
