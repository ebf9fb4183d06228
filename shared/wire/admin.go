package wire

import (
	"encoding/json"
	"time"
)

// VoucherSpec is the body of POST /admin/vouchers. Pointers tell a missing field from zero.
type VoucherSpec struct {
	Code           string `json:"code"` // any case: stored upper-cased (CanonicalCode)
	DiscountAmount *int64 `json:"discountAmount"`
	// DiscountPercent (1–100), instead of DiscountAmount, takes a percentage of the order off,
	// at most MaxDiscountAmount when given.
	DiscountPercent   *int    `json:"discountPercent"`
	MaxDiscountAmount *int64  `json:"maxDiscountAmount"`
	MinOrderAmount    int64   `json:"minOrderAmount"`
	TotalLimit        *int    `json:"totalLimit"`
	PerUserLimit      *int    `json:"perUserLimit"` // default 1
	StartsAt          string  `json:"startsAt"`     // RFC 3339, parsed by the receiver to name a bad one
	EndsAt            string  `json:"endsAt"`
	FlashSale         bool    `json:"flashSale"`
	Active            *bool   `json:"active"`  // default true; false creates it paused
	HoldTTL           *string `json:"holdTtl"` // a duration ("10m"); default VG_HOLD_TTL
}

// Bounds on a voucher's limits.
const (
	MaxTotalLimit   = 10_000_000
	MaxPerUserLimit = 1_000
	MaxPercent      = 100
	MinHoldTTL      = time.Second
	MaxHoldTTL      = 24 * time.Hour
)

// VoucherPatch is the body of PATCH /admin/vouchers/{code}: each field given is changed, the
// others stay. Null clears maxDiscountAmount (no cap) and holdTtl (back to VG_HOLD_TTL) and is
// refused for the others. Code and FlashSale are here to be refused by name: they never change.
type VoucherPatch struct {
	DiscountAmount    Field[int64]           `json:"discountAmount"`
	DiscountPercent   Field[int]             `json:"discountPercent"`
	MaxDiscountAmount Field[int64]           `json:"maxDiscountAmount"`
	MinOrderAmount    Field[int64]           `json:"minOrderAmount"`
	TotalLimit        Field[int]             `json:"totalLimit"`
	PerUserLimit      Field[int]             `json:"perUserLimit"`
	StartsAt          Field[string]          `json:"startsAt"`
	EndsAt            Field[string]          `json:"endsAt"`
	Active            Field[bool]            `json:"active"`
	HoldTTL           Field[string]          `json:"holdTtl"`
	Code              Field[json.RawMessage] `json:"code"`
	FlashSale         Field[json.RawMessage] `json:"flashSale"`
}

// Field is a member of a JSON object that may be missing, null or a value: Set when the member
// is there at all (the last of repeated ones counts), Null when it is null.
type Field[T any] struct {
	Set, Null bool
	Value     T
}

// UnmarshalJSON reads the member's value; encoding/json calls it for null too.
func (f *Field[T]) UnmarshalJSON(b []byte) error {
	var zero T
	f.Set, f.Null, f.Value = true, string(b) == "null", zero
	if f.Null {
		return nil
	}
	return json.Unmarshal(b, &f.Value)
}

// VoucherView is the answer to GET /admin/vouchers/{code}.
type VoucherView struct {
	Code              string         `json:"code"`
	DiscountAmount    int64          `json:"discountAmount"`            // 0 for a percentage
	DiscountPercent   int            `json:"discountPercent,omitempty"` // a percentage voucher's
	MaxDiscountAmount *int64         `json:"maxDiscountAmount,omitempty"`
	MinOrderAmount    int64          `json:"minOrderAmount"`
	TotalLimit        int            `json:"totalLimit"`
	PerUserLimit      int            `json:"perUserLimit"`
	StartsAt          time.Time      `json:"startsAt"`
	EndsAt            time.Time      `json:"endsAt"`
	FlashSale         bool           `json:"flashSale"`
	Active            bool           `json:"active"`
	HoldTTL           string         `json:"holdTtl"`  // how long its reservations are held: its own, or VG_HOLD_TTL
	Revision          int64          `json:"revision"` // raised by every change (GET .../changes)
	UsedCount         int            `json:"usedCount"`
	Counts            map[string]int `json:"counts"`
	RedisRemaining    *int64         `json:"redisRemaining,omitempty"`
}

// VoucherChange is one change of a voucher (PATCH): the revision it made, when, and the fields
// it changed, by their names in VoucherPatch, before and after (null: no cap, or VG_HOLD_TTL).
type VoucherChange struct {
	Revision  int64          `json:"revision"`
	ChangedAt time.Time      `json:"changedAt"`
	Before    map[string]any `json:"before"`
	After     map[string]any `json:"after"`
}

// VoucherChanges is the answer to GET /admin/vouchers/{code}/changes: changes by revision.
// Next, the revision of this page's last change, is present only when more follow; send it
// back as ?after= for the next page.
type VoucherChanges struct {
	Changes []VoucherChange `json:"changes"`
	Next    string          `json:"next,omitempty"`
}

// Reconciliation is one voucher's report in the answer to POST /admin/reconcile: what the
// reconciler found in Redis against the database, and what it fixed.
type Reconciliation struct {
	Code            string   `json:"code"`
	Loaded          bool     `json:"loaded"`          // Redis did not have the voucher: loaded from the database
	Released        []string `json:"released"`        // orders held in Redis with no active row, past the grace period
	PutBack         []string `json:"putBack"`         // active rows Redis had lost
	InFlight        int      `json:"inFlight"`        // held in Redis without a row, within the grace period
	RemainingBefore int64    `json:"remainingBefore"` // Redis's uses left before
	RemainingAfter  int64    `json:"remainingAfter"`  // after
	TotalLimit      int      `json:"totalLimit"`      // the voucher's total_limit
	Expected        int64    `json:"expected"`        // total_limit minus the active rows
	Drift           int64    `json:"drift"`           // RemainingBefore - Expected
	Recounted       bool     `json:"recounted"`       // remaining or per-customer counts had to be rebuilt
}

// Reconciliations is the answer to POST /admin/reconcile.
type Reconciliations struct {
	Vouchers []Reconciliation `json:"vouchers"`
}
