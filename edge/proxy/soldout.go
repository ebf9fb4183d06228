package proxy

import (
	"github.com/valyala/fasthttp"

	"vouchergate/edge/orderid"
)

// reserve answers a reservation for a voucher known to be sold out with 409, unless its order
// may hold a use (a retry of a granted reservation, whose 201 must come again) or its orderId
// cannot be read with certainty: those, and every reservation of a voucher not known to be sold
// out, go to the backend.
func (p *Proxy) reserve(ctx *fasthttp.RequestCtx, code []byte) {
	if e, refresh := p.opts.SoldOut.Lookup(code, ctx.Time()); e != nil {
		if refresh {
			p.counts.refreshesAsked.Inc()
			p.opts.Refresher.Ask(e.Code())
		}
		var buf orderid.Buffer // stays on the stack: Extract and MayHold keep no reference
		id, ok := orderid.Extract(ctx.Request.Body(), &buf)
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
