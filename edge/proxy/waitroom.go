package proxy

import (
	"time"

	"github.com/valyala/fasthttp"

	"vouchergate/shared/wire"
)

// waitRoom bounds the reservations the edge has at the backends at once. At a sale's opening
// thousands arrive in the milliseconds before the edge learns the sell-out; forwarded all at
// once they would queue at the backends (or fail on a full connection pool with 503) and be
// refused there one by one, long after the edge could have answered them. In the room they
// wait for a free slot instead, and each is answered from memory the moment the voucher is
// known to be sold out. The slots are fewer than the connections, so that confirms, releases,
// quota calls and the refresher's state reads still find one.
type waitRoom struct {
	slots chan struct{} // a token per reservation at a backend; nil: unbounded
	wait  time.Duration // how long a reservation waits for a slot before its 503
}

func newWaitRoom(slots int, wait time.Duration) waitRoom {
	if slots <= 0 {
		return waitRoom{}
	}
	return waitRoom{slots: make(chan struct{}, slots), wait: wait}
}

// tryEnter takes a slot if one is free.
func (w waitRoom) tryEnter() bool {
	if w.slots == nil {
		return true
	}
	select {
	case w.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// leave gives back the slot taken by tryEnter or awaitSlot.
func (w waitRoom) leave() {
	if w.slots != nil {
		<-w.slots
	}
}

// awaitSlot waits for a slot for a reservation of code. It reports true holding one; false when
// it has answered the request itself: 409 from memory because the voucher sold out meanwhile
// (and the order holds no use), or 503 when no slot came free in time.
func (p *Proxy) awaitSlot(ctx *fasthttp.RequestCtx, code []byte, decoded *wire.ReserveRequest) bool {
	p.counts.reserveWaits.Inc()
	timer := time.NewTimer(p.room.wait)
	defer timer.Stop()
	for {
		soldOut := p.opts.SoldOut.SoldOut() // before the lookup: a sell-out stored after it still wakes us
		// fromMemory, not answeredFromMemory: the request was counted as a holder's when it
		// first met the sold-out state
		if p.fromMemory(ctx, code, decoded, false) == answered {
			return false
		}
		select {
		case p.room.slots <- struct{}{}:
			return true
		case <-soldOut:
		case <-timer.C:
			p.counts.upstreamError(fasthttp.StatusServiceUnavailable)
			answer(ctx, fasthttp.StatusServiceUnavailable, wire.CodeUnavailable, "the backends are busy; retry shortly")
			return false
		}
	}
}
