package proxy

import (
	"github.com/valyala/fasthttp"

	"vouchergate/edge/orderid"
)

// reserve answers a reservation for a voucher known to be sold out with 409, unless its order
// may hold a use (a retry of a granted reservation, whose 201 must come again) or the backend
// would refuse its body (its 400 is the backend's to give): those, and every reservation of a
// voucher not known to be sold out, go to the backend. The orderId is read by the fast scanner,
// or, for a body it cannot be certain of, by a full decode as the backend's.
func (p *Proxy) reserve(ctx *fasthttp.RequestCtx, code []byte) {
	if e, refresh := p.opts.SoldOut.Lookup(code, ctx.Time()); e != nil {
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
		holds := ok && e.MayHold(id)
		switch {
		case !ok:
			p.counts.unreadable.Inc()
		case holds:
			p.counts.holderForwards.Inc()
		default:
			p.counts.soldOut.Inc()
			if id := ctx.Request.Header.Peek(headerRequestID); validRequestID(id) {
				ctx.Response.Header.SetBytesV(headerRequestID, id)
			}
			answerSoldOut(ctx)
			return
		}
	}
	p.forward(ctx, p.opts.Backends, p.opts.BackendTimeout, code)
}
