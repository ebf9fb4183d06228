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
