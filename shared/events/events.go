// Package events defines what the backend tells every edge over NATS: a voucher's sold-out
// state, as a plain event on a subject and as the latest value in a JetStream key-value bucket,
// so an edge that (re)starts reads the current set instead of waiting for the next event.
package events

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Names derives subjects and the bucket name from a prefix, so tests and tenants sharing one
// NATS server do not hear each other.
type Names struct {
	Prefix string // e.g. "vouchergate"; tokens of letters, digits, '-' and '_' joined by '.'
}

// VoucherState is the subject on which the state of voucher code is published.
func (n Names) VoucherState(code string) string { return n.Prefix + ".voucher." + code }

// AllVoucherStates is the wildcard subject matching every VoucherState subject.
func (n Names) AllVoucherStates() string { return n.Prefix + ".voucher.*" }

// StateBucket is the JetStream key-value bucket holding each voucher's latest state, keyed by code.
func (n Names) StateBucket() string {
	return strings.NewReplacer(".", "_", "-", "_").Replace(n.Prefix) + "_voucher_state"
}

// CheckPrefix reports why p cannot be a subject prefix.
func CheckPrefix(p string) error {
	if p == "" {
		return fmt.Errorf("NATS subject prefix is empty")
	}
	for _, tok := range strings.Split(p, ".") {
		if tok == "" {
			return fmt.Errorf("NATS subject prefix %q has an empty token", p)
		}
		for _, c := range tok {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("NATS subject prefix %q: %q is not allowed; use letters, digits, '-', '_' and '.'", p, c)
			}
		}
	}
	return nil
}

// VoucherState says whether a voucher is sold out, and whether it is paused. Sent when the last
// use goes, when a request finds none left (a few times a second at most), when a release makes
// it available again, and when an edit pauses, resumes or gives it another limit. An edge
// answers a new order of a sold-out or paused voucher from memory, and forwards its holders'.
//
// Backends publish states in whatever order their reads and writes happen to finish, so a
// state read earlier may arrive later; Version orders them. It is the voucher's version in
// Redis read together with the state (lua/state.lua), raised by every change of the voucher's
// uses and holders, and every backend reads the same one: of two states, the one with the
// higher version is the newer, and equal versions name the same state. Version 0 means
// unordered: a state written by a backend from before versions, or read while Redis held no
// version (the voucher not loaded); see Stale.
type VoucherState struct {
	Code    string    `json:"code"`
	SoldOut bool      `json:"soldOut"`
	Paused  bool      `json:"paused,omitempty"` // an edge from before pauses reads it as not sold out, and forwards
	At      time.Time `json:"at"`
	Version uint64    `json:"version,omitempty"`
	// Holders holds every orderId that held a use when the backend read them from Redis, at or
	// after the sell-out or pause, so orders still being written are in it. Set when SoldOut or
	// Paused.
	Holders *HolderFilter `json:"holders,omitempty"`
}

// Held reports whether an edge answers the voucher's new orders from memory: sold out or paused.
func (s VoucherState) Held() bool { return s.SoldOut || s.Paused }

// Stale reports whether s is older than a state of version held, so that whoever keeps a
// voucher's state (an edge) must ignore it. An unordered state (version 0) is never stale: it
// comes from a backend that does not version its states, and is taken in arrival order as
// before versions existed.
func (s VoucherState) Stale(held uint64) bool { return s.Version != 0 && s.Version < held }

// Encode returns the JSON payload of s.
func (s VoucherState) Encode() ([]byte, error) { return json.Marshal(s) }

// Head is what a state says without its holders: its version, whether it is sold out, paused.
type Head struct {
	Version uint64 `json:"version"`
	SoldOut bool   `json:"soldOut"`
	Paused  bool   `json:"paused"`
}

// DecodeHead reads only the version (0 for a state written before versions) and the sold-out
// and paused flags of a payload written by Encode, without decoding its holders.
func DecodeHead(b []byte) (Head, error) {
	var h Head
	if err := json.Unmarshal(b, &h); err != nil {
		return Head{}, fmt.Errorf("decode voucher state head: %w", err)
	}
	return h, nil
}

// DecodeVoucherState parses a payload written by Encode.
func DecodeVoucherState(b []byte) (VoucherState, error) {
	var s VoucherState
	if err := json.Unmarshal(b, &s); err != nil {
		return VoucherState{}, fmt.Errorf("decode voucher state: %w", err)
	}
	if s.Held() && s.Holders == nil {
		return VoucherState{}, fmt.Errorf("decode voucher state %q: sold out or paused without holders", s.Code)
	}
	return s, nil
}
