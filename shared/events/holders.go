package events

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/bits-and-blooms/bloom/v3"

	"vouchergate/shared/wire"
)

// holderFalsePositive is the chance that a new order is taken for a holder. A false positive
// only forwards that request to the backend, which refuses it; a false negative never happens.
const holderFalsePositive = 0.001

// HolderFilter is a Bloom filter of orderIds holding a use. A Bloom filter keeps the event small
// (about 1.8 bytes an order, 3.6 for a shopper's) for vouchers with many uses, where a list would
// exceed NATS's payload limit. bits-and-blooms/bloom is the well-kept Go implementation.
type HolderFilter struct {
	f *bloom.BloomFilter
	// scoped: a shopper's order is in the filter in its stored form too, so MayHoldScoped can
	// tell; false for a filter from a backend that kept client orderIds alone.
	scoped bool
}

// NewHolderFilter returns a filter holding orderIDs, as stored. A shopper's orderId is stored in
// its scope (wire.ShopperOrderID), and the filter holds it twice: as its client sent it, which
// the edge looks up before it knows who sends a request (MayHold), and in its scope, which the
// edge looks up for a shopper (MayHoldScoped), so that another customer's order of the same
// string is answered as no order at all.
func NewHolderFilter(orderIDs []string) *HolderFilter {
	n := uint(len(orderIDs))
	for _, id := range orderIDs {
		if wire.ClientOrderID(id) != id {
			n++
		}
	}
	f := bloom.NewWithEstimates(max(n, 16), holderFalsePositive)
	for _, id := range orderIDs {
		if client := wire.ClientOrderID(id); client != id {
			f.AddString(client)
		}
		f.AddString(id)
	}
	return &HolderFilter{f: f, scoped: true}
}

// MayHold reports whether orderID, as a client sends it, may hold a use: false means it
// certainly does not. It does not allocate.
func (h *HolderFilter) MayHold(orderID []byte) bool { return h.f.Test(orderID) }

// MayHoldScoped reports whether a shopper's order, in its stored form (wire.ShopperOrderID), may
// hold a use: false means it certainly does not. A filter that does not hold stored forms
// cannot tell, and says it may.
func (h *HolderFilter) MayHoldScoped(stored []byte) bool { return !h.scoped || h.f.Test(stored) }

// MarshalJSON encodes the filter: the library's object, with "scoped" when it holds stored
// forms (an edge from before them ignores the member, and looks up client orderIds only).
func (h *HolderFilter) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(h.f)
	if err != nil || !h.scoped {
		return b, err
	}
	if len(b) < 2 || b[len(b)-1] != '}' {
		return nil, fmt.Errorf("encode holder filter: not an object: %.20q", b)
	}
	return append(b[:len(b)-1], `,"scoped":true}`...), nil
}

// UnmarshalJSON decodes a filter written by MarshalJSON. A state comes from the network (the
// bucket, the subject, a backend's answer): the bit set's size is checked against the bytes
// that carry it before the library reads it, since it allocates what the size says (a crafted
// size panics or takes all memory) and tests bits without bounds.
func (h *HolderFilter) UnmarshalJSON(b []byte) error {
	var raw struct {
		B      string `json:"b"` // the bit set, URL-safe base64: its size in bits, then 64-bit words, big-endian
		Scoped bool   `json:"scoped"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("decode holder filter: %w", err)
	}
	bits, err := base64.URLEncoding.DecodeString(raw.B)
	if err != nil || len(bits) < 8 {
		return fmt.Errorf("decode holder filter: no bit set (%v)", err)
	}
	if n := binary.BigEndian.Uint64(bits[:8]); n/64+1 > uint64(len(bits)-8)/8+1 || n > math.MaxInt32*64 {
		return fmt.Errorf("decode holder filter: a bit set of %d bits in %d bytes", n, len(bits)-8)
	}
	f := &bloom.BloomFilter{}
	if err := json.Unmarshal(b, f); err != nil {
		return fmt.Errorf("decode holder filter: %w", err)
	}
	if f.Cap() == 0 || f.K() == 0 {
		return fmt.Errorf("decode holder filter: empty filter")
	}
	// Test reads the bit set unchecked: one missing or shorter than the filter's size (a
	// malformed state from the bucket or the subject) would crash the edge on its next lookup.
	if set := f.BitSet(); set == nil || set.Len() < f.Cap() {
		return fmt.Errorf("decode holder filter: bit set shorter than the filter's %d bits", f.Cap())
	}
	h.f, h.scoped = f, raw.Scoped
	return nil
}
