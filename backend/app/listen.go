package app

import (
	"errors"
	"fmt"
	"net"

	"vouchergate/shared/config"
)

// Listeners are the backend's bound addresses: the API's, and the ops listener's when
// VG_BACKEND_OPS_ADDR sets one.
type Listeners struct {
	API net.Listener
	Ops net.Listener // nil: no ops listener
}

// Listen binds the addresses cfg names. The command binds them before New: a port another
// process holds then stops it at once, naming the variable and the address, before it dials
// the stores or migrates the database. Connections that come meanwhile wait in the backlog
// until Serve.
func Listen(cfg config.Backend) (*Listeners, error) {
	l := &Listeners{}
	if cfg.HasOps() {
		ln, err := net.Listen("tcp", cfg.OpsAddr)
		if err != nil {
			return nil, fmt.Errorf("VG_BACKEND_OPS_ADDR=%s: %w", cfg.OpsAddr, err)
		}
		l.Ops = ln
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("VG_BACKEND_ADDR=%s: %w", cfg.Addr, err)
	}
	l.API = ln
	return l, nil
}

// Close releases the addresses; after Serve has taken them, Close of the App does.
func (l *Listeners) Close() error {
	var errs []error
	for _, ln := range []net.Listener{l.API, l.Ops} {
		if ln != nil {
			errs = append(errs, ln.Close())
		}
	}
	return errors.Join(errs...)
}
