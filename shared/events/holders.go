package events

import (
	"encoding/json"
	"fmt"

	"github.com/bits-and-blooms/bloom/v3"
)

// holderFalsePositive is the chance that a new order is taken for a holder. A false positive
// only forwards that request to the backend, which refuses it; a false negative never happens.
const holderFalsePositive = 0.001

// HolderFilter is a Bloom filter of orderIds holding a use. A Bloom filter keeps the event small
// (about 1.8 bytes an order) for vouchers with many uses, where a list would exceed NATS's
// payload limit. bits-and-blooms/bloom is the well-kept Go implementation.
type HolderFilter struct {
	f *bloom.BloomFilter
}

// NewHolderFilter returns a filter holding orderIDs.
func NewHolderFilter(orderIDs []string) *HolderFilter {
	n := uint(len(orderIDs))
	if n < 16 {
		n = 16
	}
	f := bloom.NewWithEstimates(n, holderFalsePositive)
	for _, id := range orderIDs {
		f.AddString(id)
	}
	return &HolderFilter{f: f}
}

// MayHold reports whether orderID may hold a use: false means it certainly does not.
// It does not allocate.
func (h *HolderFilter) MayHold(orderID []byte) bool { return h.f.Test(orderID) }

// MarshalJSON encodes the filter.
func (h *HolderFilter) MarshalJSON() ([]byte, error) { return json.Marshal(h.f) }

// UnmarshalJSON decodes a filter written by MarshalJSON.
func (h *HolderFilter) UnmarshalJSON(b []byte) error {
	f := &bloom.BloomFilter{}
	if err := json.Unmarshal(b, f); err != nil {
		return fmt.Errorf("decode holder filter: %w", err)
	}
	if f.Cap() == 0 || f.K() == 0 {
		return fmt.Errorf("decode holder filter: empty filter")
	}
	h.f = f
	return nil
}
