package app

import (
	"context"
	"fmt"
	"time"
)

// defaultGrace bounds a shutdown whose settings name no grace (config.Backend's default).
const defaultGrace = 10 * time.Second

// stopServing stops accepting connections and lets the requests in flight finish, within ctx:
// /readyz answers 503 from now on (a load balancer stops sending), and the server drains
// (shared/drain: keep-alive clients take their last answer and leave, no request that reached
// the server is dropped).
func (a *App) stopServing(ctx context.Context) error {
	a.API.Drain()
	var err error
	if d := a.serving.Load(); d != nil {
		err = d.Shutdown(ctx)
	} else {
		err = a.http.ShutdownWithContext(ctx)
	}
	if err != nil {
		return fmt.Errorf("stop serving: requests still in flight after the grace: %w", err)
	}
	return nil
}
