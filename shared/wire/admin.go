package wire

import "time"

// VoucherSpec is the body of POST /admin/vouchers. Pointers tell a missing field from zero.
type VoucherSpec struct {
	Code           string `json:"code"`
	DiscountAmount *int64 `json:"discountAmount"`
	MinOrderAmount int64  `json:"minOrderAmount"`
	TotalLimit     *int   `json:"totalLimit"`
	PerUserLimit   *int   `json:"perUserLimit"` // default 1
	StartsAt       string `json:"startsAt"`     // RFC 3339, parsed by the receiver to name a bad one
	EndsAt         string `json:"endsAt"`
	FlashSale      bool   `json:"flashSale"`
}

// Bounds on a voucher's limits.
const (
	MaxTotalLimit   = 10_000_000
	MaxPerUserLimit = 1_000
)

// VoucherView is the answer to GET /admin/vouchers/{code}.
type VoucherView struct {
	Code           string         `json:"code"`
	DiscountAmount int64          `json:"discountAmount"`
	MinOrderAmount int64          `json:"minOrderAmount"`
	TotalLimit     int            `json:"totalLimit"`
	PerUserLimit   int            `json:"perUserLimit"`
	StartsAt       time.Time      `json:"startsAt"`
	EndsAt         time.Time      `json:"endsAt"`
	FlashSale      bool           `json:"flashSale"`
	UsedCount      int            `json:"usedCount"`
	Counts         map[string]int `json:"counts"`
	RedisRemaining *int64         `json:"redisRemaining,omitempty"`
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
