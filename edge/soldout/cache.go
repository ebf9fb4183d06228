// Package soldout is the edge's memory of which vouchers are sold out or paused and which
// orders hold their uses, so that a reservation for such a voucher is answered without the
// backend. A paused voucher's entry is a sold-out one's with its flag: learned, renewed and
// expired alike; the proxy answers it NOT_ELIGIBLE PAUSED instead of OUT_OF_STOCK (paused first,
// as the backend decides).
//
// An entry is made only from a state that carries the voucher's holders (a NATS event, the
// state bucket, or the backend's live state read after a 409 passed through): a sell-out
// learned from a 409 alone never makes one, because the edge would then turn away retries of
// granted orders. An entry expires after a TTL so that a missed "back in stock" cannot block a
// sale for long; a Refresher reads the live state again before a busy entry expires, and the
// NATS listener renews the entries of vouchers its watch of the state bucket confirms sold
// out (Renew), for up to Keep past each confirmation, so that the shield does not depend on a
// live backend.
//
// The entries live in a bigcache (github.com/allegro/bigcache/v3): per voucher code, a small
// fixed-size record (sold-out flag, the entry's version, its expiry in unix nanoseconds).
// bigcache evicts a record once its LifeWindow (the TTL rounded up to a second, bigcache's
// resolution) has passed; Lookup checks the record's own expiry on every read, since bigcache's
// Get does not, so an entry expires exactly at its TTL. The decoded holder filters, which are
// large and hold pointers, stay out of bigcache: they sit in an immutable map behind an atomic
// pointer, with the version of the record they belong to, and a lookup uses one only when the
// versions agree. A lookup is thus: bigcache read of the record → sold out and not expired →
// filter of that version → MayHold. It takes no lock of this package; bigcache takes a shard's
// read lock and copies the key and the record (2 small allocations: v3.1.0 has no Get that
// reads into a caller's buffer).
//
// States may arrive out of order (from several backends, the bucket and live reads), so the
// cache keeps, per code, the highest state version it applied (events.VoucherState.Version)
// and refuses an older state, also once the entry is gone: a stale sell-out must not come back
// after a newer "back in stock". Writers compare versions under the cache's lock; lookups never
// see them.
package soldout

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/allegro/bigcache/v3"

	"vouchergate/shared/events"
	"vouchergate/shared/wire"
)

// ErrNoHolders is returned by Apply for a sold-out or paused state without its holders.
var ErrNoHolders = errors.New("sold-out or paused state without holders")

// ErrBadCode is returned by Apply for a state whose code is not a voucher code.
var ErrBadCode = errors.New("state for an invalid voucher code")

// ErrStale is returned by Apply for a state older than one it applied before: nothing changed.
var ErrStale = errors.New("voucher state older than the one held")

// Options configure a Cache.
type Options struct {
	TTL          time.Duration    // an entry is forgotten this long after it was learned
	Keep         time.Duration    // an entry Renew confirmed lives this long past the confirmation; TTL when shorter
	RefreshAfter time.Duration    // a looked-up entry asks for a refresh this often; 0: never
	Now          func() time.Time // the clock entries are learned by; time.Now when nil
}

// Entry is what the edge knows about one sold-out voucher. It is immutable once published,
// except for when it last asked for a refresh.
type Entry struct {
	code    string
	version uint64 // the version of the bigcache record this entry belongs to
	paused  bool   // paused (answered NOT_ELIGIBLE PAUSED), else sold out
	holders *events.HolderFilter
	at      time.Time    // the state's time, as the backend wrote it
	asked   atomic.Int64 // when a lookup last asked for a refresh, unix ns; at first, when the edge learned it
}

// Code is the voucher's code.
func (e *Entry) Code() string { return e.code }

// At is when the backend read the state.
func (e *Entry) At() time.Time { return e.at }

// Paused reports whether the voucher is paused; false: sold out (and not paused).
func (e *Entry) Paused() bool { return e.paused }

// MayHold reports whether orderID may hold a use of the voucher, in which case its request must
// be forwarded. It does not allocate.
func (e *Entry) MayHold(orderID []byte) bool { return e.holders.MayHold(orderID) }

// MayHoldScoped reports whether a shopper's order, in its stored form (wire.ShopperOrderID),
// may hold a use of the voucher (events.HolderFilter.MayHoldScoped).
func (e *Entry) MayHoldScoped(stored []byte) bool { return e.holders.MayHoldScoped(stored) }

// A record is what bigcache stores per code: flags (1 byte, padded to 8), version, expiry. A
// record is "held" (the edge answers its voucher's new orders) when sold out or paused.
const (
	recordSize    = 24
	flagSoldOut   = 1
	flagPaused    = 2
	offVersion    = 8
	offExpiry     = 16
	bigcacheShard = 16 // a power of two; sold-out vouchers are few
)

type record struct {
	soldOut, paused bool
	version         uint64
	expiry          int64 // unix nanoseconds, by the cache's clock
}

// held reports whether the record's voucher is answered from memory.
func (r record) held() bool { return r.soldOut || r.paused }

func (r record) encode(b *[recordSize]byte) []byte {
	*b = [recordSize]byte{}
	if r.soldOut {
		b[0] |= flagSoldOut
	}
	if r.paused {
		b[0] |= flagPaused
	}
	binary.LittleEndian.PutUint64(b[offVersion:], r.version)
	binary.LittleEndian.PutUint64(b[offExpiry:], uint64(r.expiry))
	return b[:]
}

func decode(v []byte) (record, bool) {
	if len(v) != recordSize {
		return record{}, false
	}
	return record{
		soldOut: v[0]&flagSoldOut != 0,
		paused:  v[0]&flagPaused != 0,
		version: binary.LittleEndian.Uint64(v[offVersion:]),
		expiry:  int64(binary.LittleEndian.Uint64(v[offExpiry:])),
	}, true
}

// Cache holds sold-out entries by voucher code. It is safe for concurrent use.
type Cache struct {
	ttl, keep, refreshAfter time.Duration
	now                     func() time.Time

	store   *bigcache.BigCache                // the records; evicts them after its LifeWindow
	closer  *closer                           // stops store's cleaning goroutine
	filters atomic.Pointer[map[string]*Entry] // holders by code, read without a lock; replaced, never changed

	mu       sync.Mutex                    // serialises writers
	versions map[string]uint64             // bumped by every write of a code; see ApplyIf
	held     map[string]uint64             // the highest state version applied per code; see Apply
	soldOut  atomic.Pointer[chan struct{}] // closed, and replaced, when a sold-out entry is stored; see SoldOut
}

type closer struct {
	once  sync.Once
	store *bigcache.BigCache
}

func (c *closer) close() { c.once.Do(func() { _ = c.store.Close() }) }

// New returns an empty cache.
func New(o Options) *Cache {
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Keep = max(o.Keep, o.TTL)
	// bigcache counts whole seconds and evicts a record only once more than LifeWindow has
	// passed since it was set, so rounding the longest life up never evicts a live entry.
	life := (o.Keep + time.Second - 1).Truncate(time.Second)
	if life < time.Second {
		life = time.Second
	}
	store, err := bigcache.New(context.Background(), bigcache.Config{
		Shards:             bigcacheShard,
		LifeWindow:         life,
		CleanWindow:        time.Second,
		MaxEntriesInWindow: 1024,
		MaxEntrySize:       64,
		Logger:             bigcache.DefaultLogger(),
	})
	if err != nil { // only for an invalid Config, which this one is not
		panic("soldout: bigcache: " + err.Error())
	}
	c := &Cache{
		ttl: o.TTL, keep: o.Keep, refreshAfter: o.RefreshAfter, now: o.Now,
		store: store, closer: &closer{store: store}, versions: map[string]uint64{}, held: map[string]uint64{},
	}
	signal := make(chan struct{})
	c.soldOut.Store(&signal)
	m := map[string]*Entry{}
	c.filters.Store(&m)
	// The cleaning goroutine holds only store: stop it when the Cache is gone.
	runtime.AddCleanup(c, func(cl *closer) { cl.close() }, c.closer)
	return c
}

// Close stops the cache's background eviction. A closed cache still answers, but nothing
// evicts its records but Sweep and later writes.
func (c *Cache) Close() { c.closer.close() }

// Lookup returns the live entry of code at time now, or nil when the voucher is not known to
// be sold out or paused. now is the caller's (the request's time, which fasthttp has already read):
// reading the clock again would cost the sold-out path a tenth of its time. refresh is true for
// one lookup per RefreshAfter of an entry learned at least that long ago: its caller should ask
// a Refresher to read the state again (a read that failed, with every backend down, is asked
// again one RefreshAfter later). Lookup allocates only bigcache's copies of the key and the
// record.
func (c *Cache) Lookup(code []byte, now time.Time) (e *Entry, refresh bool) {
	// bigcache hashes the key and compares it with the stored one, keeping no reference: the
	// string may share code's bytes for the call.
	v, err := c.store.Get(unsafe.String(unsafe.SliceData(code), len(code)))
	if err != nil {
		return nil, false
	}
	r, ok := decode(v)
	if !ok || !r.held() || now.UnixNano() >= r.expiry {
		return nil, false
	}
	e = (*c.filters.Load())[string(code)]
	if e == nil || e.version != r.version {
		return nil, false // a write in progress: the backend answers
	}
	if c.refreshAfter > 0 {
		n, last := now.UnixNano(), e.asked.Load()
		refresh = n-last >= int64(c.refreshAfter) && e.asked.CompareAndSwap(last, n)
	}
	return e, refresh
}

// Apply records state s: a sold-out or paused state (with its holders) makes or replaces the
// voucher's entry, learned now, to live TTL (or longer, when the entry it replaces had been
// renewed further: the voucher is still held); any other state removes it. A state older than one
// applied before (events.VoucherState.Stale) changes nothing and returns ErrStale; a state of
// the same version is applied again, which renews the entry.
func (c *Cache) Apply(s events.VoucherState) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applyLocked(s)
}

// SoldOut returns a channel closed once the next sold-out (or paused) entry is stored, of any
// voucher.
// A waiter takes it before its Lookup, so that an entry stored in between still wakes it.
func (c *Cache) SoldOut() <-chan struct{} { return *c.soldOut.Load() }

// Version returns a number that changes whenever code's state is written. Read it before
// fetching a state and pass it to ApplyIf.
func (c *Cache) Version(code string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.versions[code]
}

// StateVersion returns the highest state version applied for code, 0 when none was.
func (c *Cache) StateVersion(code string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[code]
}

// ApplyIf applies s only if code's state was not written since Version returned version and s
// is not stale (see Apply), so that a slow read cannot undo a newer event. It reports whether
// it applied s.
func (c *Cache) ApplyIf(s events.VoucherState, version uint64) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.versions[s.Code] != version {
		return false, nil
	}
	err := c.applyLocked(s)
	if errors.Is(err, ErrStale) {
		return false, nil
	}
	return err == nil, err
}

func (c *Cache) applyLocked(s events.VoucherState) error {
	if !wire.ValidCode(s.Code) {
		return ErrBadCode
	}
	if s.Held() && s.Holders == nil {
		return ErrNoHolders
	}
	if s.Stale(c.held[s.Code]) {
		return ErrStale
	}
	if s.Version > c.held[s.Code] { // an unordered state (0) leaves the highest seen in place
		c.held[s.Code] = s.Version
	}
	c.versions[s.Code]++
	version := c.versions[s.Code]
	now := c.now()
	if !s.Held() {
		// Record first: once it is gone no lookup answers, whatever the filters hold.
		_ = c.store.Delete(s.Code) // ErrEntryNotFound when not sold out: nothing to do
		c.publishLocked(s.Code, nil)
		return nil
	}
	// Filter first: until the record of this version is stored, lookups see the versions
	// disagree and forward, which is always safe.
	e := &Entry{code: s.Code, version: version, paused: s.Paused, holders: s.Holders, at: s.At}
	e.asked.Store(now.UnixNano())
	expiry := now.Add(c.ttl).UnixNano()
	if old, ok := c.recordLocked(s.Code); ok && old.held() && old.expiry > expiry {
		expiry = old.expiry
	}
	c.publishLocked(s.Code, e)
	var b [recordSize]byte
	if err := c.store.Set(s.Code, record{soldOut: s.SoldOut, paused: s.Paused, version: version, expiry: expiry}.encode(&b)); err != nil {
		c.publishLocked(s.Code, nil)
		return err
	}
	next := make(chan struct{})
	close(*c.soldOut.Swap(&next))
	return nil
}

// Renew makes code's sold-out (or paused) entry, if it is live, live until Keep past confirmed:
// the time at which the voucher's state in NATS was known to say so. It never shortens an entry,
// never brings back one that expired, and changes no state: a read in flight (ApplyIf) still
// applies. It reports whether the entry lives on.
func (c *Cache) Renew(code string, confirmed time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.recordLocked(code)
	if !ok || !r.held() || c.now().UnixNano() >= r.expiry {
		return false
	}
	if until := confirmed.Add(c.keep).UnixNano(); until > r.expiry {
		r.expiry = until
		var b [recordSize]byte
		if err := c.store.Set(code, r.encode(&b)); err != nil {
			return false
		}
	}
	return true
}

// recordLocked reads code's record from bigcache.
func (c *Cache) recordLocked(code string) (record, bool) {
	v, err := c.store.Get(code)
	if err != nil {
		return record{}, false
	}
	return decode(v)
}

// publishLocked replaces the filters with a copy holding e for code (none when e is nil).
// Expired ones stay until Sweep drops them together with their records.
func (c *Cache) publishLocked(code string, e *Entry) {
	old := *c.filters.Load()
	m := make(map[string]*Entry, len(old)+1)
	for k, other := range old {
		if k != code {
			m[k] = other
		}
	}
	if e != nil {
		m[code] = e
	}
	c.filters.Store(&m)
}

// live reports whether code's record in bigcache is a sold-out or paused one of version,
// unexpired at now.
func (c *Cache) live(code string, version uint64, now time.Time) bool {
	v, err := c.store.Get(code)
	if err != nil {
		return false
	}
	r, ok := decode(v)
	return ok && r.held() && r.version == version && now.UnixNano() < r.expiry
}

// Sweep drops expired entries, from bigcache and from the filters, and the filters of records
// bigcache has evicted. Lookup never returns them; sweeping only frees their memory and keeps
// Len exact.
func (c *Cache) Sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.filters.Load()
	now := c.now()
	var dead []string
	for code, e := range old {
		if !c.live(code, e.version, now) {
			dead = append(dead, code)
		}
	}
	if len(dead) == 0 {
		return
	}
	m := make(map[string]*Entry, len(old)-len(dead))
	for code, e := range old {
		m[code] = e
	}
	for _, code := range dead {
		delete(m, code)
		_ = c.store.Delete(code)
	}
	c.filters.Store(&m)
}

// Len returns the number of entries in bigcache: those not yet evicted or swept.
func (c *Cache) Len() int { return c.store.Len() }

// Codes returns the codes of the live entries.
func (c *Cache) Codes() []string {
	now := c.now()
	var codes []string
	for code, e := range *c.filters.Load() {
		if c.live(code, e.version, now) {
			codes = append(codes, code)
		}
	}
	return codes
}
