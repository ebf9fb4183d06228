package proxy

import (
	"github.com/valyala/fasthttp"

	"vouchergate/edge/orderid"
	"vouchergate/shared/wire"
)

// The answers for a paused voucher's new order: what the backend answers, without its message.
var (
	pausedBody = []byte(`{"error":"` + wire.CodeNotEligible + `","reason":"` + wire.ReasonPaused + `"}`)
	// pausedValidBody is wire.ValidateResponse for a paused voucher.
	pausedValidBody = []byte(`{"valid":false,"error":"` + wire.CodeNotEligible + `","reason":"` + wire.ReasonPaused + `"}`)
)

// reserve answers a reservation for a voucher known to be sold out with 409 (paused: 422
// NOT_ELIGIBLE PAUSED), unless its order may hold a use (a retry of a granted reservation, whose 201 must come again) or the backend
// would refuse its body (its 400 is the backend's to give): those, and every reservation of a
// voucher not known to be sold out, go to the backend, through the waiting room (waitroom.go).
//
// With shoppers' tokens on, serve has asked the sold-out cache before checking the token (a new
// order of a sold-out voucher gets its 409 without one), and shopper is the token's, verified:
// the body is decoded in full and its customerId must be the subject (auth.go). With tokens off,
// shopper is nil and the orderId scanner reads the body only for a voucher known to be sold out.
func (p *Proxy) reserve(ctx *fasthttp.RequestCtx, code []byte, shopper *wire.Shopper) {
	var decoded *wire.ReserveRequest
	if shopper != nil { // serve asked the sold-out cache before it checked the token
		req, ok := p.reservationFor(ctx, shopper.Subject)
		if !ok {
			return
		}
		decoded = &req
	} else if p.answeredFromMemory(ctx, code, nil, false) {
		return
	}
	if !p.room.tryEnter() && !p.awaitSlot(ctx, code, decoded) {
		return
	}
	defer p.room.leave()
	p.forward(ctx, p.toBackend(code, shopper))
}

// validate answers a reservation's dry run for a voucher known to be sold out with "not valid:
// OUT_OF_STOCK", under the reservation's rule (an order that may hold a use, or a body the
// backend would refuse, goes to the backend). Others go to the backend without the waiting
// room: a dry run takes no use, so it does not queue for the reservations' share of the slots.
// With tokens on, as for reserve: serve asked the cache first, and the body's customerId must
// be the subject.
func (p *Proxy) validate(ctx *fasthttp.RequestCtx, code []byte, shopper *wire.Shopper) {
	if shopper != nil {
		if _, ok := p.reservationFor(ctx, shopper.Subject); !ok {
			return
		}
	} else if p.answeredFromMemory(ctx, code, nil, true) {
		return
	}
	p.forward(ctx, p.toBackend(nil, shopper))
}

// answeredFromMemory answers the reservation's 409 OUT_OF_STOCK (dryRun: the dry run's "not
// valid: OUT_OF_STOCK") when code is known to be sold out and the request's order holds no use
// of it, and reports whether it did; a paused voucher's is 422 NOT_ELIGIBLE PAUSED ("not valid:
// NOT_ELIGIBLE PAUSED"), as the backend answers it: paused first, sold out or not. The orderId is read by the fast scanner, or, for a body it
// cannot be certain of, by a full decode as the backend's; or it is decoded's, when the body was
// decoded before.
func (p *Proxy) answeredFromMemory(ctx *fasthttp.RequestCtx, code []byte, decoded *wire.ReserveRequest, dryRun bool) bool {
	e, refresh := p.opts.SoldOut.Lookup(code, ctx.Time())
	if e == nil {
		return false
	}
	if refresh {
		p.counts.refreshesAsked.Inc()
		p.opts.Refresher.Ask(e.Code())
	}
	var buf orderid.Buffer // stays on the stack: Extract and MayHold keep no reference
	var id []byte
	var ok bool
	if decoded != nil {
		id = []byte(decoded.OrderID)
		ok = wire.IsOrderID(id)
	} else if id, ok = orderid.Extract(ctx.Request.Body(), &buf); !ok {
		p.counts.slowReads.Inc()
		var s string
		if s, ok = orderid.Decode(ctx.Request.Body()); ok {
			id = []byte(s)
		}
	}
	switch {
	case !ok:
		p.counts.unreadable.Inc()
		return false
	case e.MayHold(id):
		p.counts.holderForwards.Inc()
		return false
	}
	if id := ctx.Request.Header.Peek(headerRequestID); validRequestID(id) {
		ctx.Response.Header.SetBytesV(headerRequestID, id)
	}
	switch {
	case e.Paused() && dryRun:
		p.counts.pausedValid.Inc()
		answerFromMemory(ctx, fasthttp.StatusOK, pausedValidBody)
	case e.Paused():
		p.counts.paused.Inc()
		answerFromMemory(ctx, fasthttp.StatusUnprocessableEntity, pausedBody)
	case dryRun:
		p.counts.soldOutValid.Inc()
		answerSoldOutValidate(ctx)
	default:
		p.counts.soldOut.Inc()
		answerSoldOut(ctx)
	}
	return true
}

// answerFromMemory writes status with a fixed JSON body. It does not allocate.
func answerFromMemory(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBodyRaw(body)
}
