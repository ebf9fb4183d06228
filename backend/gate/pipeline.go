package gate

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/batch"
)

// maxPipeline bounds how many calls one pipeline carries.
const maxPipeline = 512

// pipeline sends the calls of one script that queued while the last pipeline was in flight as
// one Redis pipeline (auto-pipelining, on batch.Queue). Redis still runs each call as its own
// atomic script; a crowd of buyers costs one write and one read per pipeline, on both sides,
// instead of one per buyer. A lone call goes at once, and pipelines grow with the load.
type pipeline struct {
	rdb    redis.UniversalClient
	script *redis.Script
	queue  *batch.Queue[*scriptCall]
}

// scriptCall is one call waiting to be sent, and where its reply goes.
type scriptCall struct {
	ctx   context.Context
	keys  []string
	args  []any
	done  chan *redis.Cmd
	state atomic.Int32 // queued, then sent or abandoned: whichever comes first stays
}

// A call's state: a call abandoned while queued is never sent; once sent, it is waited for.
const (
	queued int32 = iota
	sent
	abandoned
)

func newPipeline(rdb redis.UniversalClient, script *redis.Script) *pipeline {
	p := &pipeline{rdb: rdb, script: script}
	p.queue = batch.New(maxPipeline, p.sendOne)
	return p
}

// run runs the script with keys and args in the next pipeline and returns its reply. When ctx
// ends before the call is sent, it is never sent and run returns ctx's error; once sent, run
// waits for the reply (the client's read timeout bounds it), so a caller never walks away
// from a script that goes on to take a use in its name.
func (p *pipeline) run(ctx context.Context, keys []string, args ...any) *redis.Cmd {
	c := &scriptCall{ctx: ctx, keys: keys, args: args, done: make(chan *redis.Cmd, 1)}
	p.queue.Add(c)
	select {
	case cmd := <-c.done:
		return cmd
	case <-ctx.Done():
		if c.state.CompareAndSwap(queued, abandoned) {
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(ctx.Err())
			return cmd
		}
		return <-c.done
	}
}

func (p *pipeline) sendOne(batch []*scriptCall) {
	live := batch[:0:0]
	for _, c := range batch {
		if c.ctx.Err() != nil || !c.state.CompareAndSwap(queued, sent) {
			c.state.Store(abandoned)
			cmd := redis.NewCmd(c.ctx)
			cmd.SetErr(context.Cause(c.ctx))
			c.done <- cmd
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	// The client's read and write timeouts bound the pipeline; no caller's deadline cuts the
	// others' calls short.
	ctx := context.Background()
	pipe := p.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(live))
	for i, c := range live {
		cmds[i] = p.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own reply or error
	for i, c := range live {
		if err := cmds[i].Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			// Redis lost its scripts (restarted): Run loads it again. The call did not run.
			c.done <- p.script.Run(context.WithoutCancel(c.ctx), p.rdb, c.keys, c.args...)
			continue
		}
		c.done <- cmds[i]
	}
}
