package gate

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/batch"
	"vouchergate/lua"
)

// maxPipeline bounds how many reservations one pipeline carries.
const maxPipeline = 512

// pipeline sends the reservations that queued while the last pipeline was in flight as one
// Redis pipeline (auto-pipelining, on batch.Queue), and those of one voucher in it as one call
// of reserve.lua, which takes them in arrival order, atomically. A crowd of buyers of one voucher
// costs one script call, one write and one read per pipeline, on both sides, instead of one of
// each per buyer; each still gets the answer it would get from a script of its own. A lone
// reservation goes at once, and pipelines grow with the load.
type pipeline struct {
	rdb   redis.UniversalClient
	queue *batch.Queue[*reservation]
}

// reservation is one reservation waiting to be sent, and where its reply goes.
type reservation struct {
	ctx   context.Context
	keys  []string
	args  [reserveArgs]any // reserve.lua's five arguments for one reservation
	done  chan reservationReply
	state atomic.Int32 // queued, then sent or abandoned: whichever comes first stays
}

// reserveArgs is how many of reserve.lua's arguments each reservation takes.
const reserveArgs = 5

// reservationReply is reserve.lua's {status, detail} for one reservation, or why there is none.
type reservationReply struct {
	pair []any
	err  error
}

// A reservation's state: one abandoned while queued is never sent; once sent, it is waited for.
const (
	queued int32 = iota
	sent
	abandoned
)

func newPipeline(rdb redis.UniversalClient) *pipeline {
	p := &pipeline{rdb: rdb}
	p.queue = batch.New(maxPipeline, p.send)
	return p
}

// run reserves, with args, in the voucher whose keys are keys, in the next pipeline, and returns
// the script's {status, detail}. When ctx ends before the reservation is sent, it is never sent
// and run returns ctx's error; once sent, run waits for the reply (the client's read timeout
// bounds it), so a caller never walks away from a script that goes on to take a use in its name.
func (p *pipeline) run(ctx context.Context, keys []string, args [reserveArgs]any) ([]any, error) {
	r := &reservation{ctx: ctx, keys: keys, args: args, done: make(chan reservationReply, 1)}
	p.queue.Add(r)
	select {
	case rep := <-r.done:
		return rep.pair, rep.err
	case <-ctx.Done():
		if r.state.CompareAndSwap(queued, abandoned) {
			return nil, ctx.Err()
		}
		rep := <-r.done
		return rep.pair, rep.err
	}
}

// send sends one pipeline: a call of reserve.lua per voucher among the live reservations.
func (p *pipeline) send(waiting []*reservation) {
	var calls []*voucherCall
	byVoucher := map[string]*voucherCall{}
	for _, r := range waiting {
		if r.ctx.Err() != nil || !r.state.CompareAndSwap(queued, sent) {
			r.state.Store(abandoned)
			r.done <- reservationReply{err: context.Cause(r.ctx)}
			continue
		}
		c := byVoucher[r.keys[0]]
		if c == nil {
			c = &voucherCall{keys: r.keys}
			byVoucher[r.keys[0]] = c
			calls = append(calls, c)
		}
		c.reservations = append(c.reservations, r)
	}
	if len(calls) == 0 {
		return
	}
	// The client's read and write timeouts bound the pipeline; no caller's deadline cuts the
	// others' calls short.
	ctx := context.Background()
	pipe := p.rdb.Pipeline()
	for _, c := range calls {
		c.cmd = lua.Reserve.EvalSha(ctx, pipe, c.keys, c.args()...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own reply or error
	for _, c := range calls {
		if err := c.cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			// Redis lost its scripts (restarted): Run loads it again. The call did not run.
			c.cmd = lua.Reserve.Run(ctx, p.rdb, c.keys, c.args()...)
		}
		c.answer()
	}
}

// voucherCall is one call of reserve.lua: the reservations of one voucher in a pipeline.
type voucherCall struct {
	keys         []string
	reservations []*reservation
	cmd          *redis.Cmd
}

func (c *voucherCall) args() []any {
	args := make([]any, 0, 1+reserveArgs*len(c.reservations))
	args = append(args, len(c.reservations))
	for _, r := range c.reservations {
		args = append(args, r.args[:]...)
	}
	return args
}

// answer hands each reservation its own {status, detail}, or the call's failure.
func (c *voucherCall) answer() {
	res, err := c.cmd.Slice()
	if err == nil && len(res) != 2*len(c.reservations) {
		err = fmt.Errorf("script replied %d values for %d reservations", len(res), len(c.reservations))
	}
	for i, r := range c.reservations {
		if err != nil {
			r.done <- reservationReply{err: err}
			continue
		}
		r.done <- reservationReply{pair: res[2*i : 2*i+2 : 2*i+2]}
	}
}
