package proxy

import (
	"github.com/valyala/fasthttp"

	"vouchergate/edge/orderid"
)

// reserve answers a reservation for a voucher known to be sold out with 409, unless its order
// may hold a use (a retry of a granted reservation, whose 201 must come again) or the backend
// would refuse its body (its 400 is the backend's to give): those, and every reservation of a
// voucher not known to be sold out, go to the backend, through the waiting room (waitroom.go).
func (p *Proxy) reserve(ctx *fasthttp.RequestCtx, code []byte) {
	if p.answeredFromMemory(ctx, code, false) {
		return
	}
	if !p.room.tryEnter() && !p.awaitSlot(ctx, code) {
		return
	}
	defer p.room.leave()
	p.forward(ctx, p.opts.Backends, p.opts.BackendTimeout, code)
}

// validate answers a reservation's dry run for a voucher known to be sold out with "not valid:
// OUT_OF_STOCK", under the reservation's rule (an order that may hold a use, or a body the
// backend would refuse, goes to the backend). Others go to the backend without the waiting
// room: a dry run takes no use, so it does not queue for the reservations' share of the slots.
func (p *Proxy) validate(ctx *fasthttp.RequestCtx, code []byte) {
	if p.answeredFromMemory(ctx, code, true) {
		return
	}
	p.forward(ctx, p.opts.Backends, p.opts.BackendTimeout, nil)
}

// answeredFromMemory answers the reservation's 409 OUT_OF_STOCK (dryRun: the dry run's "not
// valid: OUT_OF_STOCK") when code is known to be sold out and the request's order holds no use
// of it, and reports whether it did. The orderId is read by the fast scanner, or, for a body it
// cannot be certain of, by a full decode as the backend's.
func (p *Proxy) answeredFromMemory(ctx *fasthttp.RequestCtx, code []byte, dryRun bool) bool {
	e, refresh := p.opts.SoldOut.Lookup(code, ctx.Time())
	if e == nil {
		return false
	}
	if refresh {
		p.counts.refreshesAsked.Inc()
		p.opts.Refresher.Ask(e.Code())
	}
	var buf orderid.Buffer // stays on the stack: Extract and MayHold keep no reference
	body := ctx.Request.Body()
	id, ok := orderid.Extract(body, &buf)
	if !ok {
		p.counts.slowReads.Inc()
		var s string
		if s, ok = orderid.Decode(body); ok {
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
	if dryRun {
		p.counts.soldOutValid.Inc()
		answerSoldOutValidate(ctx)
		return true
	}
	p.counts.soldOut.Inc()
	answerSoldOut(ctx)
	return true
}
