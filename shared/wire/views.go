package wire

import "time"

// Bounds on a page of an admin list (GET /admin/vouchers, GET /admin/vouchers/{code}/redemptions).
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 500
)

// VoucherPage is the answer to GET /admin/vouchers: vouchers ordered by code. Each is what
// GET /admin/vouchers/{code} answers, without RedisRemaining. Next, the last code of this page,
// is present only when more vouchers follow; send it back as ?after= for the next page.
type VoucherPage struct {
	Vouchers []VoucherView `json:"vouchers"`
	Next     string        `json:"next,omitempty"`
}

// Redemption is one order's redemption of a voucher, as the database holds it.
type Redemption struct {
	OrderID    string `json:"orderId"`
	CustomerID string `json:"customerId"` // as stored: 42 and "42" are both "42"
	// ByShopper: the shopper reserved it through the edge with its token, so the orderId is the
	// shopper's own (another customer may hold one of the same string).
	ByShopper      bool       `json:"byShopper,omitempty"`
	Status         string     `json:"status"` // StatusReserved, StatusConfirmed, StatusReleased or StatusRefunded
	OrderAmount    int64      `json:"orderAmount"`
	DiscountAmount int64      `json:"discountAmount"`
	ReservedAt     time.Time  `json:"reservedAt"`
	HoldExpiresAt  time.Time  `json:"holdExpiresAt"`
	ConfirmedAt    *time.Time `json:"confirmedAt,omitempty"`
	ReleasedAt     *time.Time `json:"releasedAt,omitempty"`
	RefundedAt     *time.Time `json:"refundedAt,omitempty"`
}

// RedemptionPage is the answer to GET /admin/vouchers/{code}/redemptions: redemptions ordered
// by their id. Next, the id of this page's last redemption as a decimal string, is present only
// when more follow; send it back as ?after= for the next page.
type RedemptionPage struct {
	Redemptions []Redemption `json:"redemptions"`
	Next        string       `json:"next,omitempty"`
}
