// Command edge stands in front of the checkout API during a flash sale: it answers
// reservations for sold-out vouchers from memory and passes everything else on. Settings come
// from VG_* variables (see configs/edge.yaml).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"vouchergate/edge/app"
	"vouchergate/shared/config"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "edge:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := config.LoadEdge()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := app.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close() // on the way out early; the signal's way closes it below
	errc := make(chan error, 1)
	go func() { errc <- a.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stop() // a second signal ends the process at once
	return a.Close()
}
