package voucher

import "context"

// early201, when set, answers a flash winner before its write: a deliberately broken build
// (go test -tags vg_early201, early201_broken.go) that the fault tests' history check must
// catch. It is nil in every other build.
var early201 func(s *Service, ctx context.Context, v Voucher, h Hold, holder Holder) (Redemption, error)
