package sale

import (
	"time"

	"vouchergate/shared/wire"
)

// recordedSale is the history of a good sale of a 10-use voucher (one per customer): 40 new
// orders of customers 1..40, a millisecond apart, the first 10 granted 100 off and the rest
// told OUT_OF_STOCK; then 10 retries (of 5 granted and 5 refused orders), answered as their
// originals; after the sale order 0 confirmed and order 1 released, and every granted order
// re-sent: 201 again, 409 for the released one.
func recordedSale() *History {
	h := &History{Target: "http://127.0.0.1:8081", Code: "REHEARSAL", OrderPrefix: "t-", Rate: 1000,
		Started: time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)}
	h.Before = wire.VoucherView{Code: "REHEARSAL", TotalLimit: 10, PerUserLimit: 1, DiscountAmount: 100, FlashSale: true,
		Counts: map[string]int{"RESERVED": 0, "CONFIRMED": 0, "RELEASED": 0}}
	answer := func(i int, status int, discount int64, code string) Outcome {
		at := time.Duration(i) * time.Millisecond
		return Outcome{Scheduled: at, Sent: at, Done: at + time.Duration(1+i%7)*time.Millisecond,
			State: Answered, Status: status, Discount: discount, Error: code}
	}
	for i := range 40 {
		h.Plan = append(h.Plan, Planned{Customer: uint64(i + 1), Order: int32(i), Original: int32(i)})
		if i < 10 {
			h.Reservations = append(h.Reservations, answer(i, 201, 100, ""))
		} else {
			h.Reservations = append(h.Reservations, answer(i, 409, 0, "OUT_OF_STOCK"))
		}
	}
	for _, orig := range []int{0, 1, 2, 3, 4, 20, 21, 22, 23, 24} {
		i := len(h.Plan)
		p := h.Plan[orig]
		h.Plan = append(h.Plan, p)
		o := h.Reservations[orig]
		o.Scheduled, o.Sent, o.Done = time.Duration(i)*time.Millisecond, time.Duration(i)*time.Millisecond, time.Duration(i+2)*time.Millisecond
		h.Reservations = append(h.Reservations, o)
	}
	h.FollowUps = []Step{
		{Order: 0, Action: Confirm, Outcome: answer(60, 200, 0, "")},
		{Order: 1, Action: Release, Outcome: answer(61, 200, 0, "")},
	}
	for order := range int32(10) {
		o := answer(70+int(order), 201, 100, "")
		if order == 1 {
			o = answer(70+int(order), 409, 0, "RESERVATION_RELEASED")
		}
		h.Resends = append(h.Resends, Step{Order: order, Outcome: o})
	}
	h.After = h.Before
	h.After.UsedCount = 9
	h.After.Counts = map[string]int{"RESERVED": 8, "CONFIRMED": 1, "RELEASED": 1}
	return h
}
