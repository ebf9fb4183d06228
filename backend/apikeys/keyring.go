package apikeys

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
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

// ReloadSettle is how far apart Reload's two reads of the file are: a file still being written
// reads differently the second time and is not loaded.
const ReloadSettle = 100 * time.Millisecond

// Why a reload kept the keys before: the result label of vouchergate_api_key_reloads_total.
const (
	resultLoaded   = "loaded"   // the file's keys are in use
	resultRefused  = "refused"  // the file does not parse
	resultEmpty    = "empty"    // the file names no key (or is empty)
	resultMissing  = "missing"  // the file is gone or cannot be read
	resultChanging = "changing" // the file changed between Reload's two reads
)

// Keyring is the keys in use, read from a file and replaced whole when it changes. It is safe
// for concurrent use: Lookup never waits for a reload.
//
// A file is used only once it parses, names at least one key, and read the same twice (two
// polls in a row, or Reload's two reads ReloadSettle apart): a file caught half written, one
// emptied, or one gone leaves the keys before in use, counted by result and flagged by the
// vouchergate_api_keys_stale gauge until a good file is loaded. Operators replace the file by a
// rename, which readers never see half done.
type Keyring struct {
	path    string
	log     *slog.Logger
	current atomic.Pointer[Set]
	stale   atomic.Bool // the file on disk is not the one in use: gone, empty or not parsing

	mu         sync.Mutex        // one reload at a time; guards the fields below
	inUse      [sha256.Size]byte // the digest of the content whose keys are in use
	reported   [sha256.Size]byte // the digest of the content loaded or refused last
	pending    [sha256.Size]byte // the digest Poll read last, not yet loaded or refused
	hasPending bool
	unreadable bool // Poll could not read the file last time

	reloads *prometheus.CounterVec
}

// Open reads the keys file at path. Unlike a reload, it fails if the file cannot be read or
// parsed: a backend must not start with keys other than the operator wrote. reg (nil: not
// exported) takes the count of reloads by result, the number of keys loaded and whether they
// are stale.
func Open(path string, log *slog.Logger, reg prometheus.Registerer) (*Keyring, error) {
	k := &Keyring{path: path, log: log,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vouchergate_api_key_reloads_total",
			Help: "Reloads of VG_API_KEYS_FILE after a change or SIGHUP, by result (loaded; the old keys stay: refused, empty, missing, changing)."},
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
	k.inUse = sha256.Sum256(raw)
	k.reported = k.inUse
	if reg != nil {
		loaded := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vouchergate_api_keys",
			Help: "Service API keys loaded from VG_API_KEYS_FILE."}, func() float64 { return float64(k.current.Load().Len()) })
		stale := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vouchergate_api_keys_stale",
			Help: "1 while VG_API_KEYS_FILE is gone, empty or does not parse, and the keys loaded before stay in use."},
			func() float64 {
				if k.stale.Load() {
					return 1
				}
				return 0
			})
		reg.MustRegister(k.reloads, loaded, stale)
	}
	log.Info("api keys loaded", "file", path, "keys", set.Names())
	return k, nil
}

// Lookup returns the key whose secret is secret, among the keys loaded last.
func (k *Keyring) Lookup(secret []byte) (Key, bool) { return k.current.Load().Lookup(secret) }

// Stale reports whether the file on disk, at the last reload or poll, was not usable (gone,
// empty, not parsing) and the keys before stayed in use.
func (k *Keyring) Stale() bool { return k.stale.Load() }

// Reload reads the file twice, ReloadSettle apart, and uses its keys if both reads agree. A
// file that cannot be read, changes between the reads, does not parse or names no key leaves
// the keys as they were; the error is logged as a warning and returned.
func (k *Keyring) Reload() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	raw, err := os.ReadFile(k.path)
	if err != nil {
		return k.kept(resultMissing, fmt.Errorf("read: %w", err))
	}
	time.Sleep(ReloadSettle)
	again, err := os.ReadFile(k.path)
	if err != nil {
		return k.kept(resultMissing, fmt.Errorf("read: %w", err))
	}
	if !bytes.Equal(raw, again) {
		return k.kept(resultChanging, fmt.Errorf("the file changed between two reads %v apart; write the new file beside it and rename it over", ReloadSettle))
	}
	k.hasPending = false
	return k.load(raw)
}

// Poll reloads the file once it differs from what was loaded or refused last and has read the
// same at two polls in a row, so that a file being written is not taken half done; a bad file is
// reported once, not at every poll. It returns what Reload would.
func (k *Keyring) Poll() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	raw, err := os.ReadFile(k.path)
	if err != nil {
		k.hasPending = false
		if k.unreadable { // reported already
			return nil
		}
		k.unreadable = true
		return k.kept(resultMissing, fmt.Errorf("read: %w", err))
	}
	k.unreadable = false
	d := sha256.Sum256(raw)
	switch {
	case d == k.inUse: // back to the keys in use, as after a missing file returned
		k.hasPending = false
		k.reported = d
		k.stale.Store(false)
		return nil
	case d == k.reported:
		k.hasPending = false
		return nil
	case !k.hasPending || d != k.pending:
		k.pending, k.hasPending = d, true // read it again at the next poll
		return nil
	}
	k.hasPending = false
	return k.load(raw)
}

// load uses the keys of raw, or keeps the old ones if it does not parse or names none. mu is
// held.
func (k *Keyring) load(raw []byte) error {
	k.reported = sha256.Sum256(raw)
	set, err := Parse(raw)
	switch {
	case errors.Is(err, ErrNoKeys):
		return k.kept(resultEmpty, err)
	case err != nil:
		return k.kept(resultRefused, err)
	}
	k.current.Store(set)
	k.inUse = k.reported
	k.stale.Store(false)
	k.reloads.WithLabelValues(resultLoaded).Inc()
	k.log.Info("api keys reloaded", "file", k.path, "keys", set.Names())
	return nil
}

// kept counts and logs a reload that left the keys before in use. A file changing under
// Reload is no sign of a bad file: it does not mark the keys stale.
func (k *Keyring) kept(result string, err error) error {
	err = fmt.Errorf("%s=%s: %w", FileVar, k.path, err)
	if result != resultChanging {
		k.stale.Store(true)
	}
	k.reloads.WithLabelValues(result).Inc()
	k.log.Warn("api keys not reloaded; the keys loaded before stay in use", "result", result, "err", err)
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
