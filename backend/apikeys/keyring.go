package apikeys

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// FileVar names the variable holding the keys file's path.
const FileVar = "VG_API_KEYS_FILE"

// PollEvery is how often Watch reads the keys file for changes by default (VG_API_KEYS_POLL).
//
// Polling, not fsnotify: a second's delay is nothing for a rotation; reading a file of a few
// hundred bytes a second costs nothing; and it sees every way a file is replaced (written in
// place, renamed over, a Kubernetes secret's symlink swapped), where a watch on the file is lost
// when the file is renamed over and a watch on the directory must filter its events. It compares
// the content, not the mtime, so that a rewrite of the same size within the file system's
// timestamp granularity is not missed; and it adds no dependency.
const PollEvery = time.Second

// Keyring is the keys in use, read from a file and replaced whole when it changes. It is safe
// for concurrent use: Lookup never waits for a reload.
type Keyring struct {
	path    string
	log     *slog.Logger
	current atomic.Pointer[Set]

	mu         sync.Mutex        // one reload at a time; guards seen and unreadable
	seen       [sha256.Size]byte // the digest of the content read last
	unreadable bool              // Poll could not read the file last time

	reloads *prometheus.CounterVec
}

// Open reads the keys file at path. Unlike a reload, it fails if the file cannot be read or
// parsed: a backend must not start with keys other than the operator wrote. reg (nil: not
// exported) takes the count of reloads by result and the number of keys loaded.
func Open(path string, log *slog.Logger, reg prometheus.Registerer) (*Keyring, error) {
	k := &Keyring{path: path, log: log,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vouchergate_api_key_reloads_total",
			Help: "Reloads of VG_API_KEYS_FILE after a change or SIGHUP, by result (loaded, refused: the old keys stay)."},
			[]string{"result"}),
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: read: %w", FileVar, path, err)
	}
	set, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", FileVar, path, err)
	}
	k.current.Store(set)
	k.seen = sha256.Sum256(raw)
	if reg != nil {
		loaded := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vouchergate_api_keys",
			Help: "Service API keys loaded from VG_API_KEYS_FILE."}, func() float64 { return float64(k.current.Load().Len()) })
		reg.MustRegister(k.reloads, loaded)
	}
	log.Info("api keys loaded", "file", path, "keys", set.Names())
	return k, nil
}

// Lookup returns the key whose secret is secret, among the keys loaded last.
func (k *Keyring) Lookup(secret []byte) (Key, bool) { return k.current.Load().Lookup(secret) }

// Reload reads the file again and uses its keys. A file that cannot be read or parsed leaves the
// keys as they were; the error is logged as a warning and returned.
func (k *Keyring) Reload() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	raw, err := os.ReadFile(k.path)
	if err != nil {
		return k.refused(fmt.Errorf("read: %w", err))
	}
	return k.load(raw)
}

// Poll reloads the file if its content differs from what was read last (loaded or refused),
// so that a bad file is reported once, not every second. It returns what Reload would.
func (k *Keyring) Poll() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	raw, err := os.ReadFile(k.path)
	if err != nil {
		if k.unreadable { // reported already
			return nil
		}
		k.unreadable = true
		return k.refused(fmt.Errorf("read: %w", err))
	}
	k.unreadable = false
	if sha256.Sum256(raw) == k.seen {
		return nil
	}
	return k.load(raw)
}

// load uses the keys of raw, or keeps the old ones if it does not parse. mu is held.
func (k *Keyring) load(raw []byte) error {
	k.seen = sha256.Sum256(raw)
	set, err := Parse(raw)
	if err != nil {
		return k.refused(err)
	}
	k.current.Store(set)
	k.reloads.WithLabelValues("loaded").Inc()
	k.log.Info("api keys reloaded", "file", k.path, "keys", set.Names())
	return nil
}

func (k *Keyring) refused(err error) error {
	err = fmt.Errorf("%s=%s: %w", FileVar, k.path, err)
	k.reloads.WithLabelValues("refused").Inc()
	k.log.Warn("api keys not reloaded; the keys loaded before stay in use", "err", err)
	return err
}

// Watch polls the file every interval (PollEvery if not positive) until ctx ends, and returns a
// channel closed once it has stopped.
func (k *Keyring) Watch(ctx context.Context, every time.Duration) <-chan struct{} {
	if every <= 0 {
		every = PollEvery
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = k.Poll() // logged by load
			}
		}
	}()
	return done
}
