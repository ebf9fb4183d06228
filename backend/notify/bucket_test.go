package notify_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"vouchergate/backend/notify"
	"vouchergate/shared/events"
	"vouchergate/testkit"
)

// fixed is a Reader that always reads the same snapshot and says when it first did.
type fixed struct {
	snap notify.Snapshot
	once sync.Once
	read chan struct{}
}

func (f *fixed) Snapshot(context.Context, string) (notify.Snapshot, error) {
	f.once.Do(func() { close(f.read) })
	return f.snap, nil
}

// publishOnce runs a notifier whose Reader reads snap for code, lets it publish once, and
// reports whether it published the state on the voucher's subject, and what it logged.
func publishOnce(t *testing.T, nc *nats.Conn, names events.Names, code string, snap notify.Snapshot) (bool, string) {
	t.Helper()
	sub, err := nc.SubscribeSync(names.VoucherState(code))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	r := &fixed{snap: snap, read: make(chan struct{})}
	log, logged := testkit.CaptureLog()
	n, err := notify.New(nc, names, 1, r, time.Hour, log)
	if err != nil {
		t.Fatal(err)
	}
	n.SoldOut(code)
	<-r.read
	n.Close() // waits for the publication under way
	// One connection's messages reach a subscriber in order: the marker comes after anything
	// the notifier published.
	if err := nc.Publish(names.VoucherState(code), []byte("marker")); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return string(m.Data) != "marker", logged()
}

// What a notifier does with the state it read, by what the bucket holds already.
func TestBucketKeepsTheNewestVersion(t *testing.T) {
	const code = "V"
	sold := notify.Snapshot{Loaded: true, Remaining: 0, Orders: []string{"N"}}
	at := func(s notify.Snapshot, v uint64) notify.Snapshot { s.Version = v; return s }
	encode := func(s events.VoucherState) []byte {
		b, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	newer := encode(events.VoucherState{Code: code, Version: 20, At: time.Now().UTC()})
	legacy := encode(events.VoucherState{Code: code, SoldOut: true, At: time.Now().UTC(), Holders: events.NewHolderFilter([]string{"L"})})
	soldAt10 := encode(events.VoucherState{Code: code, SoldOut: true, Version: 10, At: time.Now().UTC(), Holders: events.NewHolderFilter([]string{"N"})})
	for _, tc := range []struct {
		name    string
		held    []byte // the bucket's value before; nil: none
		deleted bool   // the key was deleted after held was written
		read    notify.Snapshot
		written bool
		turned  bool // logged at info: the voucher turned sold out or available
	}{
		{name: "no value yet", read: at(sold, 10), written: true, turned: true},
		{name: "a deleted value", held: newer, deleted: true, read: at(sold, 10), written: true, turned: true},
		{name: "an older version", held: encode(events.VoucherState{Code: code, Version: 9}), read: at(sold, 10), written: true, turned: true},
		{name: "the same version", held: encode(events.VoucherState{Code: code, Version: 10}), read: at(sold, 10), written: true, turned: true},
		{name: "the same state again", held: soldAt10, read: at(sold, 10), written: true, turned: false},
		{name: "a newer version", held: newer, read: at(sold, 10), written: false},
		{name: "a value from a backend before versions", held: legacy, read: at(sold, 10), written: true, turned: false},
		{name: "a value that does not decode", held: []byte("garbage"), read: at(sold, 10), written: true, turned: true},
		{name: "unversioned read over a versioned value", held: newer, read: notify.Snapshot{Loaded: false}, written: false},
		{name: "unversioned read over an unversioned value", held: legacy, read: notify.Snapshot{Loaded: false}, written: true, turned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := natsConn(t)
			names := events.Names{Prefix: testkit.NATSPrefix()}
			t.Cleanup(func() { deleteBucket(nc, names) })
			kv := bucket(t, nc, names)
			ctx := context.Background()
			if tc.held != nil {
				if _, err := kv.Put(ctx, code, tc.held); err != nil {
					t.Fatal(err)
				}
			}
			if tc.deleted {
				if err := kv.Delete(ctx, code); err != nil {
					t.Fatal(err)
				}
			}

			published, logged := publishOnce(t, nc, names, code, tc.read)
			if published != tc.written {
				t.Errorf("published on the subject: %v; want %v", published, tc.written)
			}
			if told := strings.Contains(logged, "level=INFO msg=\"voucher"); told != tc.turned {
				t.Errorf("logged a turn at info: %v; want %v (one line per turn, not per state written)\n%s", told, tc.turned, logged)
			}
			e, err := kv.Get(ctx, code)
			switch {
			case tc.written && err != nil:
				t.Fatalf("bucket: %v", err)
			case tc.written:
				s, err := events.DecodeVoucherState(e.Value())
				if err != nil || s.Version != tc.read.Version || s.SoldOut != (tc.read.Loaded && tc.read.Remaining <= 0) {
					t.Errorf("bucket holds %+v, %v; want the state read, version %d", s, err, tc.read.Version)
				}
			case err != nil:
				t.Fatalf("bucket: %v", err)
			case string(e.Value()) != string(tc.held):
				t.Errorf("bucket holds %s; want %s kept", e.Value(), tc.held)
			}
		})
	}
}

func bucket(t *testing.T, nc *nats.Conn, names events.Names) jetstream.KeyValue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: names.StateBucket(), History: 1})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}
