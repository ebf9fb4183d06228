package upstream

import (
	"context"
	"fmt"

	"vouchergate/shared/events"
)

// VoucherState reads a voucher's live state from a backend (GET /vouchers/{code}/state, which
// reads Redis). It makes a Pool a soldout.Source.
func (p *Pool) VoucherState(ctx context.Context, code string) (events.VoucherState, error) {
	status, body, err := p.Fetch(ctx, "/vouchers/"+code+"/state")
	if err != nil {
		return events.VoucherState{}, fmt.Errorf("read state of %s: %w", code, err)
	}
	if status != 200 {
		return events.VoucherState{}, fmt.Errorf("read state of %s: backend answered %d", code, status)
	}
	s, err := events.DecodeVoucherState(body)
	if err != nil {
		return events.VoucherState{}, fmt.Errorf("read state of %s: %w", code, err)
	}
	return s, nil
}
