package notify_test

import (
	"context"
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
// reports whether it published the state on the voucher's subject.
func publishOnce(t *testing.T, nc *nats.Conn, names events.Names, code string, snap notify.Snapshot) bool {
	t.Helper()
	sub, err := nc.SubscribeSync(names.VoucherState(code))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	r := &fixed{snap: snap, read: make(chan struct{})}
	n, err := notify.New(nc, names, 1, r, time.Hour, testkit.QuietLog)
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
	return string(m.Data) != "marker"
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
	for _, tc := range []struct {
		name    string
		held    []byte // the bucket's value before; nil: none
		deleted bool   // the key was deleted after held was written
		read    notify.Snapshot
		written bool
	}{
		{name: "no value yet", read: at(sold, 10), written: true},
		{name: "a deleted value", held: newer, deleted: true, read: at(sold, 10), written: true},
		{name: "an older version", held: encode(events.VoucherState{Code: code, Version: 9}), read: at(sold, 10), written: true},
		{name: "the same version", held: encode(events.VoucherState{Code: code, Version: 10}), read: at(sold, 10), written: true},
		{name: "a newer version", held: newer, read: at(sold, 10), written: false},
		{name: "a value from a backend before versions", held: legacy, read: at(sold, 10), written: true},
		{name: "a value that does not decode", held: []byte("garbage"), read: at(sold, 10), written: true},
		{name: "unversioned read over a versioned value", held: newer, read: notify.Snapshot{Loaded: false}, written: false},
		{name: "unversioned read over an unversioned value", held: legacy, read: notify.Snapshot{Loaded: false}, written: true},
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

			published := publishOnce(t, nc, names, code, tc.read)
			if published != tc.written {
				t.Errorf("published on the subject: %v; want %v", published, tc.written)
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
