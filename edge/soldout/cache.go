// Package soldout is the edge's memory of which vouchers are sold out and which orders hold
// their uses, so that a reservation for a sold-out voucher is answered without the backend.
//
// An entry is made only from a state that carries the voucher's holders (a NATS event, the
// state bucket, or the backend's live state read after a 409 passed through): a sell-out
// learned from a 409 alone never makes one, because the edge would then turn away retries of
// granted orders. Entries expire after a TTL so that a missed "back in stock" cannot block a
// sale for long, and a Refresher reads the live state again before a busy entry expires.
//
// Lookups take no lock and allocate nothing: readers load an immutable map through an atomic
// pointer, and the rare writers (a few a second at most) copy it.
package soldout

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"vouchergate/shared/events"
	"vouchergate/shared/wire"
)

// ErrNoHolders is returned by Apply for a sold-out state without its holders.
var ErrNoHolders = errors.New("sold-out state without holders")

// ErrBadCode is returned by Apply for a state whose code is not a voucher code.
var ErrBadCode = errors.New("state for an invalid voucher code")

// Options configure a Cache.
type Options struct {
	TTL          time.Duration    // an entry is forgotten this long after it was learned
	RefreshAfter time.Duration    // a looked-up entry this old asks for a refresh; 0: never
	Now          func() time.Time // the clock entries are learned by; time.Now when nil
}

// Entry is what the edge knows about one sold-out voucher. It is immutable once published,
// except for its refresh flag.
type Entry struct {
	code       string
	holders    *events.HolderFilter
	at         time.Time // the state's time, as the backend wrote it
	learned    time.Time // when this edge learned it, by the cache's clock
	refreshing atomic.Bool
}

// Code is the voucher's code.
func (e *Entry) Code() string { return e.code }

// At is when the backend read the state.
func (e *Entry) At() time.Time { return e.at }

// MayHold reports whether orderID may hold a use of the voucher, in which case its request must
// be forwarded. It does not allocate.
func (e *Entry) MayHold(orderID []byte) bool { return e.holders.MayHold(orderID) }

// Cache holds sold-out entries by voucher code. It is safe for concurrent use.
type Cache struct {
	ttl, refreshAfter time.Duration
	now               func() time.Time

	entries atomic.Pointer[map[string]*Entry] // read without a lock; replaced, never changed

	mu       sync.Mutex        // serialises writers
	versions map[string]uint64 // bumped by every write of a code; see ApplyIf
}

// New returns an empty cache.
func New(o Options) *Cache {
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Cache{ttl: o.TTL, refreshAfter: o.RefreshAfter, now: o.Now, versions: map[string]uint64{}}
	m := map[string]*Entry{}
	c.entries.Store(&m)
	return c
}

// Lookup returns the live entry of code at time now, or nil when the voucher is not known to
// be sold out. now is the caller's (the request's time, which fasthttp has already read):
// reading the clock again would cost the sold-out path a tenth of its time. refresh is true for
// exactly one lookup of an entry older than RefreshAfter: its caller should ask a Refresher to
// read the state again. Lookup does not allocate.
func (c *Cache) Lookup(code []byte, now time.Time) (e *Entry, refresh bool) {
	e = (*c.entries.Load())[string(code)]
	if e == nil {
		return nil, false
	}
	age := now.Sub(e.learned)
	if age >= c.ttl {
		return nil, false
	}
	if c.refreshAfter > 0 && age >= c.refreshAfter && !e.refreshing.Load() {
		refresh = e.refreshing.CompareAndSwap(false, true)
	}
	return e, refresh
}

// Apply records state s: a sold-out state (with its holders) makes or replaces the voucher's
// entry, learned now; any other state removes it.
func (c *Cache) Apply(s events.VoucherState) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applyLocked(s)
}

// Version returns a number that changes whenever code's state is written. Read it before
// fetching a state and pass it to ApplyIf.
func (c *Cache) Version(code string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.versions[code]
}

// ApplyIf applies s only if code's state was not written since Version returned version, so
// that a slow read cannot undo a newer event. It reports whether it applied s.
func (c *Cache) ApplyIf(s events.VoucherState, version uint64) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.versions[s.Code] != version {
		return false, nil
	}
	return true, c.applyLocked(s)
}

func (c *Cache) applyLocked(s events.VoucherState) error {
	if !wire.ValidCode(s.Code) {
		return ErrBadCode
	}
	if s.SoldOut && s.Holders == nil {
		return ErrNoHolders
	}
	c.versions[s.Code]++
	old := *c.entries.Load()
	now := c.now()
	m := make(map[string]*Entry, len(old)+1)
	for code, e := range old {
		if code != s.Code && now.Sub(e.learned) < c.ttl {
			m[code] = e
		}
	}
	if s.SoldOut {
		m[s.Code] = &Entry{code: s.Code, holders: s.Holders, at: s.At, learned: now}
	}
	c.entries.Store(&m)
	return nil
}

// Sweep drops expired entries. Lookup never returns them; sweeping only frees their memory
// and keeps Len exact.
func (c *Cache) Sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.entries.Load()
	now := c.now()
	expired := 0
	for _, e := range old {
		if now.Sub(e.learned) >= c.ttl {
			expired++
		}
	}
	if expired == 0 {
		return
	}
	m := make(map[string]*Entry, len(old)-expired)
	for code, e := range old {
		if now.Sub(e.learned) < c.ttl {
			m[code] = e
		}
	}
	c.entries.Store(&m)
}

// Len returns the number of entries not yet swept.
func (c *Cache) Len() int { return len(*c.entries.Load()) }

// Codes returns the codes of the live entries.
func (c *Cache) Codes() []string {
	now := c.now()
	var codes []string
	for code, e := range *c.entries.Load() {
		if now.Sub(e.learned) < c.ttl {
			codes = append(codes, code)
		}
	}
	return codes
}
