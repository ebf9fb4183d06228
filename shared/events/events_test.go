package events

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestVersionOnTheWire(t *testing.T) {
	s := VoucherState{Code: "V", SoldOut: true, At: time.Now().UTC(), Version: 1764669600123456, Holders: NewHolderFilter([]string{"o-1"})}
	b, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeVoucherState(b)
	if err != nil || got.Version != s.Version || !got.Holders.MayHold([]byte("o-1")) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if h, err := DecodeHead(b); err != nil || h.Version != s.Version || !h.SoldOut {
		t.Fatalf("DecodeHead = %+v, %v; want version %d, sold out", h, err, s.Version)
	}

	// A backend from before versions writes none: the state is unordered.
	legacy := []byte(`{"code":"V","soldOut":false,"at":"2026-12-02T10:00:00Z"}`)
	if got, err := DecodeVoucherState(legacy); err != nil || got.Version != 0 {
		t.Fatalf("state without a version: %+v %v; want version 0", got, err)
	}
	if h, err := DecodeHead(legacy); err != nil || h.Version != 0 || h.SoldOut {
		t.Fatalf("DecodeHead of a state without a version = %+v, %v; want version 0, available", h, err)
	}
	// And an edge from before versions reads a versioned state: encoding/json skips the field.
	var old struct {
		Code    string `json:"code"`
		SoldOut bool   `json:"soldOut"`
	}
	if err := json.Unmarshal(b, &old); err != nil || old.Code != "V" || !old.SoldOut {
		t.Fatalf("an older reader: %+v %v", old, err)
	}
}

func TestStale(t *testing.T) {
	for _, tc := range []struct {
		version, held uint64
		stale         bool
	}{
		{version: 5, held: 0, stale: false},
		{version: 5, held: 4, stale: false},
		{version: 5, held: 5, stale: false}, // the same state again
		{version: 5, held: 6, stale: true},
		{version: 0, held: 6, stale: false}, // unordered: taken in arrival order
		{version: 0, held: 0, stale: false},
	} {
		if got := (VoucherState{Version: tc.version}).Stale(tc.held); got != tc.stale {
			t.Errorf("version %d against %d held: stale %v; want %v", tc.version, tc.held, got, tc.stale)
		}
	}
}

// DecodeHead must read the version and the sold-out and paused flags DecodeVoucherState reads,
// from any payload that decodes.
func FuzzDecodeHead(f *testing.F) {
	for _, s := range []string{
		`{"code":"V","soldOut":false,"at":"2026-12-02T10:00:00Z"}`,
		`{"code":"V","soldOut":false,"at":"2026-12-02T10:00:00Z","version":17}`,
		`{"code":"V","version":18446744073709551615}`,
		`{"code":"V","version":-1}`,
		`{"code":"V","version":1.5}`,
		`{"code":"V","Version":3,"version":4}`,
		`{"code":"V","soldOut":true,"SOLDOUT":false,"holders":{"n":1}}`,
		`{"code":"V","paused":true,"PAUSED":false,"holders":{"n":1}}`,
		`not json`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeVoucherState(b)
		if err != nil {
			return // DecodeHead may still read a head from a state the edge cannot use
		}
		h, err := DecodeHead(b)
		if err != nil || h.Version != s.Version || h.SoldOut != s.SoldOut || h.Paused != s.Paused {
			t.Fatalf("DecodeHead(%q) = %+v, %v; DecodeVoucherState read version %d, sold out %v, paused %v", b, h, err, s.Version, s.SoldOut, s.Paused)
		}
	})
}

// DecodeVoucherState reads what arrives over NATS and from the bucket: any payload must decode
// or be refused without panicking, and what decodes must survive Encode and decode again
// unchanged, with a holder filter that answers for any orderId.
func FuzzDecodeVoucherState(f *testing.F) {
	sold, _ := VoucherState{Code: "V", SoldOut: true, At: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Version: 7,
		Holders: NewHolderFilter([]string{"o-1", "o-2"})}.Encode()
	for _, s := range []string{
		string(sold),
		`{"code":"V","soldOut":false,"at":"2026-12-02T10:00:00Z"}`,
		`{"code":"V","soldOut":true,"at":"2026-12-02T10:00:00Z"}`,
		`{"code":"V","soldOut":true,"holders":{"m":0,"k":0,"b":null}}`,
		`{"code":"V","soldOut":true,"holders":{"m":64,"k":3,"b":{"length":8,"data":"AAAAAAAAAAA="}}}`,
		`{"code":"V","soldOut":true,"holders":{"m":1000,"k":300,"b":{"length":1,"data":""}}}`,
		`{"code":"V","soldOut":false,"paused":true,"at":"2026-12-02T10:00:00Z"}`,
		`[]`, `null`, `{"code":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeVoucherState(b)
		if err != nil {
			return
		}
		if s.Holders != nil {
			_ = s.Holders.MayHold([]byte("o-1"))
			_ = s.Holders.MayHold(b)
			_ = s.Holders.MayHoldScoped(b)
		}
		again, err := s.Encode()
		if err != nil {
			t.Fatalf("encode %+v decoded from %q: %v", s, b, err)
		}
		s2, err := DecodeVoucherState(again)
		if err != nil {
			t.Fatalf("decode %q (re-encoded from %q): %v", again, b, err)
		}
		if s.Held() && s.Holders == nil {
			t.Fatalf("%q decodes to a sold-out or paused state without holders", b)
		}
		if s2.Code != s.Code || s2.SoldOut != s.SoldOut || s2.Paused != s.Paused || s2.Version != s.Version || !s2.At.Equal(s.At) ||
			(s2.Holders == nil) != (s.Holders == nil) {
			t.Fatalf("state changed through encode and decode: %+v, then %+v", s, s2)
		}
	})
}

// Filters of every size come back through JSON holding what they held: their bit sets use
// base64's URL alphabet, which a small filter may not show.
func TestHolderFiltersSurviveJSON(t *testing.T) {
	for _, n := range []int{0, 1, 100, 1000, 20000} {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = "order-" + strconv.Itoa(i)
		}
		raw, err := VoucherState{Code: "V", SoldOut: true, Holders: NewHolderFilter(ids)}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		s, err := DecodeVoucherState(raw)
		if err != nil {
			t.Fatalf("%d holders: %v", n, err)
		}
		for _, id := range ids {
			if !s.Holders.MayHold([]byte(id)) {
				t.Fatalf("%d holders: %s lost", n, id)
			}
		}
	}
}

// A shopper's order is held twice: as its client sent it, which the edge asks before it knows
// the sender, and in the shopper's scope, so that another customer's order of the same string
// is told apart. A filter from a backend that kept client orderIds alone cannot tell them
// apart, and says a scoped order may hold a use.
func TestHolderFilterTellsShoppersOrdersApart(t *testing.T) {
	raw, err := VoucherState{Code: "V", SoldOut: true, Holders: NewHolderFilter([]string{"77/o-last", "svc-1"})}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeVoucherState(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"o-last", "svc-1"} {
		if !s.Holders.MayHold([]byte(id)) {
			t.Errorf("MayHold(%s) = false; want true", id)
		}
	}
	for id, want := range map[string]bool{"77/o-last": true, "78/o-last": false, "77/svc-1": false} {
		if got := s.Holders.MayHoldScoped([]byte(id)); got != want {
			t.Errorf("MayHoldScoped(%s) = %v; want %v", id, got, want)
		}
	}
	old, err := DecodeVoucherState([]byte(strings.Replace(string(raw), `,"scoped":true`, "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if !old.Holders.MayHoldScoped([]byte("78/o-last")) {
		t.Errorf("a filter without stored forms says 78/o-last holds no use; it cannot know")
	}
}
