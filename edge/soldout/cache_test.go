package soldout

import (
	"errors"
	"sync"
	"testing"
	"time"
	"vouchergate/testkit"

	"vouchergate/shared/events"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)} }

func soldOut(code string, holders ...string) events.VoucherState {
	return events.VoucherState{Code: code, SoldOut: true, At: time.Now(), Holders: events.NewHolderFilter(holders)}
}

func TestLookupAnswersOnlyFromHolders(t *testing.T) {
	clk := newClock()
	c := New(Options{TTL: 5 * time.Second, Now: clk.Now})
	if e, _ := c.Lookup([]byte("FLASH"), clk.Now()); e != nil {
		t.Fatalf("empty cache returned an entry")
	}
	if err := c.Apply(soldOut("FLASH", "o-1", "o-2")); err != nil {
		t.Fatal(err)
	}
	e, _ := c.Lookup([]byte("FLASH"), clk.Now())
	if e == nil {
		t.Fatal("sold-out voucher not found")
	}
	for _, id := range []string{"o-1", "o-2"} {
		if !e.MayHold([]byte(id)) {
			t.Errorf("holder %s not recognised: its retry would be refused", id)
		}
	}
	if e.MayHold([]byte("o-3")) {
		t.Errorf("new order o-3 taken for a holder (possible, but not with 2 holders at 0.1%%)")
	}
	if e, _ := c.Lookup([]byte("OTHER"), clk.Now()); e != nil {
		t.Errorf("another voucher returned an entry")
	}
}

func TestApplyRefusesStatesItCannotAnswerFrom(t *testing.T) {
	c := New(Options{TTL: time.Second})
	err := c.Apply(events.VoucherState{Code: "FLASH", SoldOut: true})
	if !errors.Is(err, ErrNoHolders) {
		t.Errorf("sold out without holders: err = %v; want ErrNoHolders", err)
	}
	if err := c.Apply(soldOut("bad code")); !errors.Is(err, ErrBadCode) {
		t.Errorf("bad code: err = %v; want ErrBadCode", err)
	}
	if c.Len() != 0 {
		t.Errorf("Len = %d after refused states; want 0", c.Len())
	}
}

func TestBackInStockRemovesTheEntry(t *testing.T) {
	c := New(Options{TTL: time.Minute})
	if err := c.Apply(soldOut("FLASH", "o-1")); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(soldOut("KEEP", "o-9")); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(events.VoucherState{Code: "FLASH", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if e, _ := c.Lookup([]byte("FLASH"), time.Now()); e != nil {
		t.Errorf("voucher back in stock still answered as sold out")
	}
	if e, _ := c.Lookup([]byte("KEEP"), time.Now()); e == nil {
		t.Errorf("another voucher's entry lost")
	}
}

func TestEntriesExpireAfterTTL(t *testing.T) {
	clk := newClock()
	c := New(Options{TTL: 5 * time.Second, Now: clk.Now})
	if err := c.Apply(soldOut("FLASH", "o-1")); err != nil {
		t.Fatal(err)
	}
	clk.Advance(4999 * time.Millisecond)
	if e, _ := c.Lookup([]byte("FLASH"), clk.Now()); e == nil {
		t.Fatal("entry gone before its TTL")
	}
	clk.Advance(time.Millisecond)
	if e, _ := c.Lookup([]byte("FLASH"), clk.Now()); e != nil {
		t.Fatal("entry answered after its TTL")
	}
	if c.Len() != 1 {
		t.Fatalf("Len = %d before Sweep; want 1", c.Len())
	}
	c.Sweep()
	if c.Len() != 0 || len(c.Codes()) != 0 {
		t.Fatalf("Len = %d, Codes = %v after Sweep; want none", c.Len(), c.Codes())
	}
}

func TestRelearningRestartsTheTTL(t *testing.T) {
	clk := newClock()
	c := New(Options{TTL: 5 * time.Second, Now: clk.Now})
	_ = c.Apply(soldOut("FLASH", "o-1"))
	clk.Advance(4 * time.Second)
	_ = c.Apply(soldOut("FLASH", "o-1"))
	clk.Advance(4 * time.Second)
	if e, _ := c.Lookup([]byte("FLASH"), clk.Now()); e == nil {
		t.Fatal("re-learned entry expired on the first learning's clock")
	}
}

func TestRefreshIsAskedOncePerInterval(t *testing.T) {
	clk := newClock()
	c := New(Options{TTL: 5 * time.Second, RefreshAfter: 2 * time.Second, Now: clk.Now})
	_ = c.Apply(soldOut("FLASH", "o-1"))
	if _, refresh := c.Lookup([]byte("FLASH"), clk.Now()); refresh {
		t.Fatal("fresh entry asked for a refresh")
	}
	clk.Advance(2 * time.Second)
	asked := 0
	for range 10 {
		if _, refresh := c.Lookup([]byte("FLASH"), clk.Now()); refresh {
			asked++
		}
	}
	if asked != 1 {
		t.Fatalf("old entry asked for %d refreshes; want 1", asked)
	}
	// The read failed (every backend down): one interval later the entry asks again, so that
	// a backend that returns is read.
	clk.Advance(2*time.Second - time.Millisecond)
	if _, refresh := c.Lookup([]byte("FLASH"), clk.Now()); refresh {
		t.Fatal("entry asked again within the interval")
	}
	clk.Advance(time.Millisecond)
	if _, refresh := c.Lookup([]byte("FLASH"), clk.Now()); !refresh {
		t.Fatal("entry whose refresh came to nothing did not ask again one interval later")
	}
	_ = c.Apply(soldOut("FLASH", "o-1")) // the refresh arrives: a new entry
	if _, refresh := c.Lookup([]byte("FLASH"), clk.Now()); refresh {
		t.Fatal("refreshed entry asked at once")
	}
	clk.Advance(2 * time.Second)
	if _, refresh := c.Lookup([]byte("FLASH"), clk.Now()); !refresh {
		t.Fatal("refreshed entry did not ask again once old")
	}
}

func TestApplyIfLosesToANewerWrite(t *testing.T) {
	c := New(Options{TTL: time.Minute})
	v := c.Version("FLASH")
	// While a read is in flight, NATS says back in stock...
	if err := c.Apply(events.VoucherState{Code: "FLASH", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// ...and the read, which saw the voucher sold out earlier, lands late.
	applied, err := c.ApplyIf(soldOut("FLASH", "o-1"), v)
	if err != nil || applied {
		t.Fatalf("ApplyIf = %v, %v; want false, nil", applied, err)
	}
	if e, _ := c.Lookup([]byte("FLASH"), time.Now()); e != nil {
		t.Fatal("a stale read marked the voucher sold out again")
	}
	applied, err = c.ApplyIf(soldOut("FLASH", "o-1"), c.Version("FLASH"))
	if err != nil || !applied {
		t.Fatalf("ApplyIf with the current version = %v, %v; want true, nil", applied, err)
	}
}

// bigcache v3.1.0's Get copies the key (to compare it) and the value on every read, and has no
// call that reads into the caller's buffer: those 2 small allocations are the price of keeping
// the entries in bigcache. Nothing else on the sold-out path may allocate.
const bigcacheGetAllocs = 2

func TestLookupAllocatesOnlyBigcachesCopies(t *testing.T) {
	c := New(Options{TTL: time.Minute, RefreshAfter: time.Second})
	_ = c.Apply(soldOut("FLASH", "o-1"))
	code, id := []byte("FLASH"), []byte("order-12345")
	n := testing.AllocsPerRun(1000, func() {
		e, _ := c.Lookup(code, time.Now())
		if e == nil || e.MayHold(id) {
			panic("unexpected")
		}
	})
	if n > bigcacheGetAllocs {
		t.Fatalf("Lookup+MayHold allocates %v times; want at most bigcache's %d copies", n, bigcacheGetAllocs)
	}
	miss := []byte("OTHER")
	if n := testing.AllocsPerRun(1000, func() { c.Lookup(miss, time.Now()) }); n != 0 {
		t.Fatalf("Lookup of a voucher not sold out allocates %v times; want 0", n)
	}
}

func TestEntriesLiveInBigcache(t *testing.T) {
	c := New(Options{TTL: time.Second})
	learned := time.Now()
	if err := c.Apply(soldOut("FLASH", "o-1")); err != nil {
		t.Fatal(err)
	}
	v, err := c.store.Get("FLASH")
	if err != nil {
		t.Fatalf("no record in bigcache: %v", err)
	}
	r, ok := decode(v)
	if !ok || !r.soldOut || r.version != c.Version("FLASH") {
		t.Fatalf("record = %+v, %v; want sold out at version %d", r, ok, c.Version("FLASH"))
	}
	if exp := time.Unix(0, r.expiry); exp.Before(learned.Add(time.Second)) || exp.After(time.Now().Add(time.Second)) {
		t.Fatalf("record expires at %v; want learned + TTL", exp)
	}
	if c.Len() != 1 {
		t.Fatalf("Len = %d; want 1", c.Len())
	}
	// No Sweep: bigcache's own cleaning (LifeWindow 1 s, 1 s resolution) must evict the record.
	testkit.Eventually(t, "bigcache evicted the record", func() bool { return c.Len() == 0 })
	// The record's expiry would still let it answer at the learning time: only bigcache's
	// eviction can make this lookup miss.
	if e, _ := c.Lookup([]byte("FLASH"), learned); e != nil {
		t.Fatal("entry answered after bigcache evicted its record")
	}
	c.Sweep()
	if n := len(*c.filters.Load()); n != 0 {
		t.Fatalf("%d filters left after Sweep; want 0", n)
	}
}

func TestFilterOfAnotherVersionIsNotUsed(t *testing.T) {
	c := New(Options{TTL: time.Minute})
	_ = c.Apply(soldOut("FLASH", "o-1"))
	// A record newer than the filter, as while a writer is between the two.
	var b [recordSize]byte
	rec := record{soldOut: true, version: c.Version("FLASH") + 1, expiry: time.Now().Add(time.Minute).UnixNano()}
	if err := c.store.Set("FLASH", rec.encode(&b)); err != nil {
		t.Fatal(err)
	}
	if e, _ := c.Lookup([]byte("FLASH"), time.Now()); e != nil {
		t.Fatal("a filter answered for a record of another version")
	}
	if len(c.Codes()) != 0 {
		t.Fatalf("Codes = %v; want none", c.Codes())
	}
}

func TestConcurrentLookupsAndWrites(t *testing.T) {
	c := New(Options{TTL: time.Minute, RefreshAfter: time.Millisecond})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if e, _ := c.Lookup([]byte("FLASH"), time.Now()); e != nil && !e.MayHold([]byte("o-1")) {
					t.Error("holder o-1 not recognised")
					return
				}
			}
		}()
	}
	for i := range 500 {
		if i%2 == 0 {
			_ = c.Apply(soldOut("FLASH", "o-1"))
		} else {
			_ = c.Apply(events.VoucherState{Code: "FLASH"})
		}
		c.Sweep()
	}
	close(stop)
	wg.Wait()
}

func BenchmarkLookup(b *testing.B) {
	c := New(Options{TTL: time.Minute, RefreshAfter: 30 * time.Second})
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = "order-" + time.Duration(i).String()
	}
	_ = c.Apply(soldOut("FLASH100", ids...))
	code, id := []byte("FLASH100"), []byte("order-new-000001")
	b.ReportAllocs()
	for b.Loop() {
		if e, _ := c.Lookup(code, time.Now()); e == nil || e.MayHold(id) {
			b.Fatal("unexpected")
		}
	}
}
