package app

import (
	"context"
	"errors"

	"vouchergate/backend/apikeys"
)

// openKeys reads the service API keys of VG_API_KEYS_FILE, or warns once that the public
// endpoints need none.
func (a *App) openKeys() error {
	if a.Config.APIKeysFile == "" {
		a.log.Warn("VG_API_KEYS_FILE is not set: the public endpoints answer without a service API key")
		return nil
	}
	var err error
	a.Keys, err = apikeys.Open(a.Config.APIKeysFile, a.log, a.Metrics)
	return err
}

// watchKeys reloads the keys when their file changes, until ctx ends; with VG_API_KEYS_POLL 0
// only SIGHUP (ReloadKeys) does.
func (a *App) watchKeys(ctx context.Context) {
	if a.Keys != nil && a.Config.APIKeysPoll > 0 {
		a.Keys.Watch(ctx, a.Config.APIKeysPoll)
	}
}

// errNoKeys is ReloadKeys' error when no keys file is configured.
var errNoKeys = errors.New("VG_API_KEYS_FILE is not set: no keys to reload")

// ReloadKeys reads the keys file again now (main calls it on SIGHUP). A file that does not
// parse leaves the keys as they were; the error says why.
func (a *App) ReloadKeys() error {
	if a.Keys == nil {
		a.log.Warn("api keys not reloaded", "err", errNoKeys)
		return errNoKeys
	}
	return a.Keys.Reload()
}
