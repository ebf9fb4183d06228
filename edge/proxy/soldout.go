package proxy

import (
	"github.com/valyala/fasthttp"

	"vouchergate/edge/orderid"
	"vouchergate/edge/soldout"
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
// With shoppers' tokens on, reservingShopper has asked the sold-out cache before checking the
// token, and shopper is the token's, verified: the body is decoded in full and its customerId
// must be the subject (auth.go), and the waiting room asks the filter for the order in the
// shopper's scope. With tokens off, shopper is nil and the orderId scanner reads the body only
// for a voucher known to be sold out.
func (p *Proxy) reserve(ctx *fasthttp.RequestCtx, code []byte, shopper *wire.Shopper) {
	var decoded *wire.ReserveRequest
	if shopper != nil { // reservingShopper asked the sold-out cache before it checked the token
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
// With tokens on, as for reserve: reservingShopper asked the cache first, and the body's
// customerId must be the subject.
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

// reservingShopper returns the verified shopper of a reservation or its dry run (dryRun) with
// shoppers' tokens on, or false when it has answered the request. A new order of a voucher the
// edge holds sold out or paused gets its answer from memory before any token is checked: that
// answer takes nothing and tells nothing, and the shield keeps its cost under a flood.
//
// When someone's order of the orderId may hold a use, only the verified shopper's own order goes
// on (the filter asked in the shopper's scope, as the backend stores it). Any other request gets
// the answer a new order gets: a body the backend would refuse, a customer without a good token
// for it, a shopper's orderId that is another customer's. Their 400, 401 or 403, or the
// backend's answer, would tell that someone holds the orderId. The filter is asked for the
// body's customer before the token is verified, so that a probe of another's orderId costs, and
// takes, no longer than a new order's answer; only a claim to a held order pays the check.
func (p *Proxy) reservingShopper(ctx *fasthttp.RequestCtx, code []byte, dryRun bool) (*wire.Shopper, bool) {
	switch p.fromMemory(ctx, code, nil, dryRun) {
	case answered:
		return nil, false
	case mayHold:
		req, ok := orderid.DecodeRequest(ctx.Request.Body())
		if ok {
			switch p.fromMemory(ctx, code, &req, dryRun) {
			case answered:
				return nil, false
			case unheld: // no longer sold out or paused
				return p.authenticate(ctx)
			case mayHold:
				if sh, err := p.verify(ctx); err == nil && sh.Subject == string(req.CustomerID) {
					p.counts.holderForwards.Inc()
					return sh, true
				}
			}
		}
		if p.answerNewOrder(ctx, code, dryRun) {
			return nil, false
		}
	}
	return p.authenticate(ctx)
}

// answeredFromMemory answers the reservation's 409 OUT_OF_STOCK (dryRun: the dry run's "not
// valid: OUT_OF_STOCK") when code is known to be sold out and the request's order holds no use
// of it, and reports whether it did; a paused voucher's is 422 NOT_ELIGIBLE PAUSED ("not valid:
// NOT_ELIGIBLE PAUSED"), as the backend answers it: paused first, sold out or not. An order that
// may hold a use is counted as forwarded.
func (p *Proxy) answeredFromMemory(ctx *fasthttp.RequestCtx, code []byte, decoded *wire.ReserveRequest, dryRun bool) bool {
	switch p.fromMemory(ctx, code, decoded, dryRun) {
	case answered:
		return true
	case mayHold:
		p.counts.holderForwards.Inc()
	}
	return false
}

// memory is what the sold-out cache said of a reservation (fromMemory).
type memory uint8

const (
	unheld     memory = iota // the voucher is not known sold out or paused
	answered                 // answered from memory
	mayHold                  // held, and the order may hold a use
	unreadable               // held, and its orderId could not be read: the backend's 400 to give
)

// fromMemory answers a reservation of a voucher held sold out or paused from memory, as
// answeredFromMemory does, unless its order may hold a use or cannot be read, and says which.
// The orderId is read by the fast scanner, or, for a body it cannot be certain of, by a full
// decode as the backend's; or it is decoded's, a shopper's reservation decoded before, whose
// order the filter is asked for in the shopper's scope (as the backend stores it).
func (p *Proxy) fromMemory(ctx *fasthttp.RequestCtx, code []byte, decoded *wire.ReserveRequest, dryRun bool) memory {
	e := p.heldEntry(ctx, code)
	if e == nil {
		return unheld
	}
	var buf orderid.Buffer // stays on the stack: Extract and MayHold keep no reference
	var id []byte
	var ok bool
	if decoded != nil {
		// Both forms must match: a filter from a backend that kept client orderIds alone cannot
		// tell scopes (MayHoldScoped says it may), and then the client form alone decides.
		client := []byte(decoded.OrderID)
		if ok = wire.IsOrderID(client); ok && e.MayHold(client) &&
			e.MayHoldScoped([]byte(wire.ShopperOrderID(string(decoded.CustomerID), decoded.OrderID))) {
			return mayHold
		}
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
		return unreadable
	case decoded == nil && e.MayHold(id):
		return mayHold
	}
	p.answerHeld(ctx, e, dryRun)
	return answered
}

// heldEntry is code's entry when the edge holds the voucher sold out or paused, or nil; a busy
// entry asks for a refresh.
func (p *Proxy) heldEntry(ctx *fasthttp.RequestCtx, code []byte) *soldout.Entry {
	e, refresh := p.opts.SoldOut.Lookup(code, ctx.Time())
	if e != nil && refresh {
		p.counts.refreshesAsked.Inc()
		p.opts.Refresher.Ask(e.Code())
	}
	return e
}

// answerNewOrder answers the request as a new order of code is answered when the edge holds it
// sold out or paused, whatever its orderId, and reports whether it did (false: not held).
func (p *Proxy) answerNewOrder(ctx *fasthttp.RequestCtx, code []byte, dryRun bool) bool {
	e := p.heldEntry(ctx, code)
	if e == nil {
		return false
	}
	p.answerHeld(ctx, e, dryRun)
	return true
}

// answerHeld writes the answer from memory for a new order of e's voucher.
func (p *Proxy) answerHeld(ctx *fasthttp.RequestCtx, e *soldout.Entry, dryRun bool) {
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
}

// answerFromMemory writes status with a fixed JSON body. It does not allocate.
func answerFromMemory(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBodyRaw(body)
}
