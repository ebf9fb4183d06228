package quota

import (
	"fmt"
	"strconv"

	"vouchergate/lua"
)

// DeductCommand returns the EVALSHA command, word by word, that a deduct sends for its first
// identity (in the service's order), with "now" from the clock. It changes nothing. It is for
// driving the script without this layer, e.g. with redis-benchmark or redis-cli, to measure or
// debug it; placeholders such as __rand_int__ may be put in idemKey.
func (s *Service) DeductCommand(bizID int64, idemKey string, items []Item) ([]string, error) {
	if err := validateDeduct(bizID, idemKey, items); err != nil {
		return nil, err
	}
	now := s.cfg.Clock.Now()
	steps, err := plan(s.cfg.KeyPrefix, bizID, items, s.rules.current(), now)
	if err != nil {
		return nil, err
	}
	keys, args := s.scripts.deductCall(&steps[0], idemKey, "a-"+idemKey, now.UnixMilli())
	cmd := make([]string, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "EVALSHA", lua.QuotaDeduct.Hash(), strconv.Itoa(len(keys)))
	cmd = append(cmd, keys...)
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			cmd = append(cmd, string(v))
		default:
			cmd = append(cmd, fmt.Sprint(v))
		}
	}
	return cmd, nil
}
