// Command backend reserves, confirms and releases voucher uses. Settings come from VG_*
// variables (see configs/backend.yaml).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"vouchergate/backend/app"
	"vouchergate/shared/config"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "backend:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := config.LoadBackend()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Bound first: a taken port stops the command before it migrates or dials anything.
	lns, err := app.Listen(cfg)
	if err != nil {
		return err
	}
	defer lns.Close() // on the way out early; once served, the app closes them
	a, err := app.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close() // on the way out early; the signal's way closes it below
	if cfg.DemoVoucher != "" {
		if err := a.CreateDemo(ctx, cfg.DemoVoucher); err != nil {
			return fmt.Errorf("create demo voucher %s: %w", cfg.DemoVoucher, err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- a.ServeListeners(lns) }()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // reload the service API keys
	for {
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			stop() // a second signal ends the process at once
			return a.Close()
		case <-hup:
			_ = a.ReloadKeys() // a failure is logged; the keys before stay
		}
	}
}
