package flashbench

import (
	"context"
	"slices"
	"time"
)

// Edge is an edge command started in front of a benchmark's backend. Close stops it and
// removes its files.
type Edge struct {
	Addr string // 127.0.0.1:port
	process
}

// StartEdge builds the edge command (unless binary names one) and starts it on a free
// 127.0.0.1 port in front of b, listening to b's NATS subjects, with the configs/edge.yaml
// defaults and env's settings (VG_NAME=value, GOGC=…) otherwise; it returns once /readyz
// answers 200 (the edge sees a healthy backend).
func StartEdge(ctx context.Context, b *Backend, binary string, env ...string) (e *Edge, err error) {
	e = &Edge{}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if binary, err = e.prepare(ctx, "edge", binary); err != nil {
		return e, err
	}
	if e.Addr, err = freeAddr(); err != nil {
		return e, err
	}
	if err = e.start(binary, append(slices.Clip(env), "VG_EDGE_ADDR="+e.Addr, "VG_EDGE_BACKENDS="+b.Addr,
		"VG_NATS_URL="+b.servers.NATSURL, "VG_NATS_PREFIX="+b.natsPfx)...); err != nil {
		return e, err
	}
	return e, e.waitReady(ctx, "http://"+e.Addr+"/readyz", 30*time.Second)
}

// Close stops the edge (SIGTERM to its PID, SIGKILL after 15 s) and removes its files.
func (e *Edge) Close() {
	e.stop(15 * time.Second)
	_ = e.removeFiles()
}
