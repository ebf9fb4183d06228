// Package listen keeps the edge's sold-out cache in step with the backends over NATS: sold-out
// and paused states alike ("held": the edge answers their new orders from memory).
//
// The edge reads the JetStream key-value bucket the backends write (events.Names.StateBucket,
// one key per voucher holding its latest events.VoucherState) with a watch, started at
// start-up and again after every reconnect. We chose the watch over a snapshot request
// answered by the backends because:
//   - the bucket keeps every voucher's latest state even when no backend runs, and a backend
//     that restarted knows nothing it could answer a snapshot with;
//   - one watch delivers the current value of every key, then a marker, then every later change
//     in the bucket's order, so there is no gap between "snapshot taken" and "listening", and
//     no need to order a snapshot against events by clocks.
//
// The watch is started again, after a pause, whenever it ends while the connection stays up,
// and when it falls behind the bucket (checkWatch): its consumer lives on one NATS node, and
// when that node dies the client is slow to recreate it elsewhere, or gives up (closing the
// watch) if the stream has no leader at that moment.
//
// The watch is also what keeps the edge's sold-out entries alive without a backend: each time
// the listener confirms that the watch has delivered everything the bucket holds (its first
// complete read, then a check that finds it caught up, every CheckEvery), it renews the entry
// of every voucher the bucket says is sold out (soldout.Cache.Renew), to live Keep past that
// confirmation. While NATS confirms, a sold-out voucher stays answered whatever the backends
// do; once it stops (NATS away, the watch stuck), the entries live at most Keep more, and a
// live backend's reads remain the other source.
//
// The backends also publish each state on a plain subject; the edge does not subscribe to it,
// since the watch already carries the same payload in order.
//
// The backends write the bucket with compare-and-set by the states' versions, so its values only
// get newer; the cache still refuses a state older than one it holds (a backend from before
// versions writes the bucket blindly, and the cache also takes live reads from the backends).
package listen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"vouchergate/edge/soldout"
	"vouchergate/shared/events"
)

// Options configure a Listener.
type Options struct {
	URL        string        // nats://host:port, or several comma-separated (a cluster)
	Names      events.Names  // subjects and bucket
	Replicas   int           // of the bucket, if this edge creates it: the backends' setting; 1 when 0
	RetryEvery time.Duration // between attempts to watch while JetStream fails; 1s when 0
	CheckEvery time.Duration // how often the watch is compared with the bucket (checkWatch); 2s when 0
}

// Listener applies the backends' voucher states to a cache. Start it once; Close stops it.
type Listener struct {
	opts  Options
	nc    *nats.Conn
	js    jetstream.JetStream
	cache *soldout.Cache
	log   *slog.Logger

	resync   chan struct{}
	synced   chan struct{} // closed after the first complete snapshot
	syncOnce sync.Once
	syncs    atomic.Uint64 // complete snapshots so far
	// The bucket as the current watch has delivered it: the vouchers whose state there is sold
	// out or paused, and when the watch was last known to have delivered the whole bucket (unix ns).
	bucketMu    sync.Mutex
	bucketSold  map[string]bool
	confirmedAt atomic.Int64
	applied     atomic.Uint64 // states applied from the bucket
	stale       atomic.Uint64 // states from the bucket older than the cache's, ignored
	// What checkWatch compares with the bucket: the newest revision the current watch has
	// delivered (or found in the bucket when it started), and whether it has read the whole
	// bucket yet.
	lastRev  atomic.Uint64
	watching atomic.Bool

	ctx    context.Context // cancelled by Close, so that a watch being set up gives up at once
	cancel context.CancelFunc
	stop   chan struct{}
	done   chan struct{}
}

// Start connects to NATS and starts watching. It does not wait for NATS: when it is down the
// listener keeps trying, and the edge learns from the backends meanwhile.
func Start(o Options, cache *soldout.Cache, log *slog.Logger) (*Listener, error) {
	if o.RetryEvery <= 0 {
		o.RetryEvery = time.Second
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = 2 * time.Second
	}
	l := &Listener{
		opts: o, cache: cache, log: log,
		resync: make(chan struct{}, 1), synced: make(chan struct{}), bucketSold: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	nc, err := nats.Connect(o.URL,
		nats.Name("vouchergate-edge"),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.ConnectHandler(func(*nats.Conn) { l.askResync() }),
		nats.ReconnectHandler(func(*nats.Conn) {
			log.Info("NATS reconnected; reading the sold-out set again")
			l.askResync()
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("NATS disconnected; learning sold-out vouchers from the backends meanwhile", "err", err)
		}),
	)
	if err != nil {
		l.cancel()
		return nil, fmt.Errorf("VG_NATS_URL=%s: connect: %w", o.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		l.cancel()
		nc.Close()
		return nil, fmt.Errorf("NATS JetStream: %w", err)
	}
	l.nc, l.js = nc, js
	if nc.IsConnected() {
		l.askResync()
	}
	go l.run()
	go l.checkWatch()
	return l, nil
}

// Synced is closed once the listener has read the whole bucket for the first time.
func (l *Listener) Synced() <-chan struct{} { return l.synced }

// Syncs is the number of complete reads of the bucket so far: one at start, one more after
// each reconnect.
func (l *Listener) Syncs() uint64 { return l.syncs.Load() }

// Applied is the number of states applied from the bucket.
func (l *Listener) Applied() uint64 { return l.applied.Load() }

// Stale is the number of states from the bucket ignored as older than the cache's.
func (l *Listener) Stale() uint64 { return l.stale.Load() }

// ConfirmedAt is when the watch was last known to have delivered the whole bucket, the zero
// time before it ever was: the sold-out entries are renewed to live VG_EDGE_SOLDOUT_KEEP past it.
func (l *Listener) ConfirmedAt() time.Time {
	if n := l.confirmedAt.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Connected reports whether the NATS connection is up.
func (l *Listener) Connected() bool { return l.nc.IsConnected() }

// ConnectedURL is the URL of the NATS server the listener is connected to, "" while it is not:
// with a cluster's servers in VG_NATS_URL, which one it picked.
func (l *Listener) ConnectedURL() string { return l.nc.ConnectedUrl() }

// Close stops watching and closes the connection.
func (l *Listener) Close() {
	l.cancel()
	close(l.stop)
	<-l.done
	l.nc.Close()
}

func (l *Listener) askResync() {
	select {
	case l.resync <- struct{}{}:
	default:
	}
}

func (l *Listener) run() {
	defer close(l.done)
	var (
		current *watch
		updates <-chan jetstream.KeyValueEntry
		retry   <-chan time.Time
	)
	defer func() { current.stop() }()
	for {
		select {
		case <-l.stop:
			return
		case <-l.resync:
		case <-retry:
			retry = nil
		case e, ok := <-updates:
			if ok {
				if e == nil { // the bucket as it was when the watch started has been read
					l.lastRev.Store(max(l.lastRev.Load(), current.startSeq))
					l.watching.Store(true)
					l.confirm(current.startedAt) // before Synced: an edge serving has its entries renewed
				}
				l.apply(e)
				continue
			}
			// The watch ended under us: the connection closed (a reconnect asks again), or
			// its consumer could not be recreated, as when the NATS node holding it died
			// and the stream was still electing a leader; then no reconnect comes, so watch
			// again after a pause.
			l.log.Warn("watch of voucher states ended; watching again", "bucket", l.opts.Names.StateBucket())
			current.stop()
			current, updates = nil, nil
			retry = time.After(l.opts.RetryEvery)
			continue
		}
		current.stop()
		current, updates = nil, nil
		l.watching.Store(false)
		l.lastRev.Store(0)
		l.forgetBucket()
		w, err := l.watch()
		if err != nil {
			l.log.Warn("watch voucher states; will retry", "bucket", l.opts.Names.StateBucket(), "err", err)
			retry = time.After(l.opts.RetryEvery)
			continue
		}
		current, updates = w, w.watcher.Updates()
	}
}

// watch is a running watch of the bucket and the context it lives in: the ordered consumer
// under it uses that context again whenever it recreates itself.
type watch struct {
	watcher   jetstream.KeyWatcher
	cancel    context.CancelFunc
	startSeq  uint64    // the bucket's last revision just before the watch started
	startedAt time.Time // just before startSeq was read
}

func (w *watch) stop() {
	if w != nil {
		_ = w.watcher.Stop()
		w.cancel()
	}
}

// watch binds the bucket, creating it (with the backends' settings) if no backend has yet,
// and watches every key.
func (l *Listener) watch() (*watch, error) {
	ctx, cancel := context.WithCancel(l.ctx)
	startedAt := time.Now()
	w, startSeq, err := l.watchBucket(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	return &watch{watcher: w, cancel: cancel, startSeq: startSeq, startedAt: startedAt}, nil
}

func (l *Listener) watchBucket(ctx context.Context) (jetstream.KeyWatcher, uint64, error) {
	bindCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	name := l.opts.Names.StateBucket()
	kv, err := l.js.KeyValue(bindCtx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = l.js.CreateKeyValue(bindCtx, jetstream.KeyValueConfig{
			Bucket: name, History: 1, Replicas: max(1, l.opts.Replicas),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = l.js.KeyValue(bindCtx, name)
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("bind bucket %s: %w", name, err)
	}
	last, err := l.bucketLastRevision(bindCtx)
	if err != nil {
		return nil, 0, err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("watch bucket %s: %w", name, err)
	}
	return w, last, nil
}

// bucketLastRevision returns the revision of the bucket's newest write.
func (l *Listener) bucketLastRevision(ctx context.Context) (uint64, error) {
	name := l.opts.Names.StateBucket()
	s, err := l.js.Stream(ctx, "KV_"+name) // a bucket is the stream KV_<bucket>
	if err != nil {
		return 0, fmt.Errorf("read bucket %s: %w", name, err)
	}
	return s.CachedInfo().State.LastSeq, nil
}

// checkWatch asks for a new watch when the current one has fallen behind the bucket: a write
// the bucket held at one check still not delivered at the next. The watch's consumer lives on
// one NATS node; when that node dies while this connection survives, nats.go notices only
// after two missed heartbeats (10 s) and, if the stream is still electing a leader then, tries
// again only 10 s later. Meanwhile the edge would learn nothing.
//
// A check that finds the watch caught up (everything the bucket held at the previous check
// delivered, or nothing newer in the bucket now) confirms the sold-out entries (confirm).
func (l *Listener) checkWatch() {
	tick := time.NewTicker(l.opts.CheckEvery)
	defer tick.Stop()
	var (
		behind   uint64    // the bucket's last revision at the previous check, if the watch lagged it
		behindAt time.Time // when that revision was read
	)
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		if !l.watching.Load() {
			behind = 0
			continue
		}
		if rev := l.lastRev.Load(); behind != 0 && rev < behind {
			l.log.Warn("watch of voucher states fell behind the bucket; watching again",
				"bucket", l.opts.Names.StateBucket(), "delivered", rev, "bucketHad", behind)
			l.watching.Store(false)
			l.askResync()
			behind = 0
			continue
		} else if behind != 0 {
			l.confirm(behindAt) // what the bucket held then has all been delivered
		}
		at := time.Now()
		ctx, cancel := context.WithTimeout(l.ctx, l.opts.CheckEvery)
		last, err := l.bucketLastRevision(ctx)
		cancel()
		if err != nil { // NATS is away: its reconnect, or the watch's end, asks for a new watch
			behind = 0
			continue
		}
		behind = 0
		if last > l.lastRev.Load() {
			behind, behindAt = last, at
		} else {
			l.confirm(at)
		}
	}
}

// confirm records that the watch had delivered the whole bucket at time at, and renews the
// entry of every voucher the bucket says is sold out or paused to live Keep past at.
func (l *Listener) confirm(at time.Time) {
	if !l.watching.Load() {
		return
	}
	storeLater(&l.confirmedAt, at.UnixNano())
	l.bucketMu.Lock()
	defer l.bucketMu.Unlock()
	for code := range l.bucketSold {
		l.cache.Renew(code, at)
	}
}

// storeLater stores n in v unless v holds a later time: run and checkWatch both confirm, and
// the later confirmation stands whichever of them stores last.
func storeLater(v *atomic.Int64, n int64) {
	for old := v.Load(); n > old && !v.CompareAndSwap(old, n); old = v.Load() {
	}
}

// noteBucket records the bucket's current state of code as the watch delivered it: held (sold
// out or paused) or not.
func (l *Listener) noteBucket(code string, held bool) {
	l.bucketMu.Lock()
	defer l.bucketMu.Unlock()
	if held {
		l.bucketSold[code] = true
	} else {
		delete(l.bucketSold, code)
	}
}

// forgetBucket drops what the previous watch delivered: a new watch delivers the bucket anew.
func (l *Listener) forgetBucket() {
	l.bucketMu.Lock()
	defer l.bucketMu.Unlock()
	clear(l.bucketSold)
}

// apply applies one entry of the bucket to the cache; a nil entry marks a complete snapshot.
func (l *Listener) apply(e jetstream.KeyValueEntry) {
	if e == nil { // the current value of every key has been delivered
		n := l.syncs.Add(1)
		l.syncOnce.Do(func() { close(l.synced) })
		l.log.Info("sold-out set read from NATS", "sync", n, "soldOut", len(l.cache.Codes()))
		return
	}
	l.lastRev.Store(max(l.lastRev.Load(), e.Revision()))
	code := e.Key()
	var s events.VoucherState
	switch e.Operation() {
	case jetstream.KeyValuePut:
		var err error
		if s, err = events.DecodeVoucherState(e.Value()); err != nil {
			l.noteBucket(code, false)
			l.log.Warn("voucher state in bucket", "code", code, "err", err)
			return
		}
		if s.Code != code {
			l.noteBucket(code, false)
			l.log.Warn("voucher state in bucket under another key", "key", code, "code", s.Code)
			return
		}
	default: // deleted or purged: nothing says it is sold out
		s = events.VoucherState{Code: code}
	}
	l.noteBucket(code, s.Held())
	if err := l.cache.Apply(s); errors.Is(err, soldout.ErrStale) {
		l.stale.Add(1)
		l.log.Debug("voucher state older than the cache's; ignored", "code", code, "version", s.Version)
		return
	} else if err != nil {
		l.log.Warn("apply voucher state", "code", code, "err", err)
		return
	}
	l.applied.Add(1)
	if s.Held() && l.watching.Load() {
		// A watch known to be complete just delivered it: as confirmed as a check would make it.
		l.cache.Renew(code, time.Now())
	}
}
