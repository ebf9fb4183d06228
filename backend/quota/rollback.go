package quota

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"vouchergate/shared/wire"
)

// Returned is what a rollback gave back to one counter.
type Returned struct {
	IdentityType string
	Identity     string
	Dimension    string
	Window       Window
	Amount       int64
}

// RollbackResult is what one rollback call gave back: nothing when the idemKey is unknown or
// was rolled back before.
type RollbackResult struct {
	IdemKey  string
	Returned []Returned
	// Replayed: a partial rollback whose rollbackKey gave back before, with the same items:
	// Returned is what it gave back then, and this call gave back nothing more.
	Replayed bool
}

// rollbackReads bounds how often a rollback re-reads a record that a running deduct of the same
// idemKey keeps changing (it changes at most twice: taken, then undone).
const rollbackReads = 4

// Rollback gives back exactly what the deduct with idemKey took, once, however often it is
// called. It also marks the idemKey rolled back, so a deduct with it that arrives later (a
// late retry) is refused with ErrRolledBack rather than counted. Unknown idemKeys are no-ops.
//
// Errors: ErrInvalid, ErrUnavailable (retry: what was given back stays given back).
func (s *Service) Rollback(ctx context.Context, bizID int64, idemKey string) (RollbackResult, error) {
	return s.As("").Rollback(ctx, bizID, idemKey)
}

// Rollback is Service.Rollback with the caller's idemKeys.
func (c Caller) Rollback(ctx context.Context, bizID int64, idemKey string) (RollbackResult, error) {
	if bizID <= 0 {
		return RollbackResult{}, invalid("bizId must be a positive integer")
	}
	if err := checkID("idemKey", idemKey, wire.MaxIdemKeyLen); err != nil {
		return RollbackResult{}, err
	}
	res, err := c.s.rollback(ctx, bizID, c.stored(idemKey))
	res.IdemKey = idemKey
	return res, err
}

func (s *Service) rollback(ctx context.Context, bizID int64, idemKey string) (RollbackResult, error) {
	s.metrics.rollbacks.Add(1)
	tags, err := s.scripts.close(ctx, requestKey(s.cfg.KeyPrefix, bizID, idemKey))
	if err != nil {
		s.metrics.unavailable.Add(1)
		return RollbackResult{}, unavailable("rollback "+idemKey, err)
	}
	slices.Sort(tags)
	out := RollbackResult{IdemKey: idemKey, Returned: []Returned{}}
	for _, tag := range tags {
		typ, identity, ok := strings.Cut(tag, ":")
		if !ok {
			continue
		}
		got, err := s.rollbackIdentity(ctx, identityBase(s.cfg.KeyPrefix, bizID, typ, identity), idemKey)
		if err != nil {
			s.metrics.unavailable.Add(1)
			return RollbackResult{}, unavailable("rollback "+idemKey, err)
		}
		for i := range got {
			got[i].IdentityType, got[i].Identity = typ, identity
			s.metrics.givenBack.Add(uint64(got[i].Amount))
		}
		out.Returned = append(out.Returned, got...)
	}
	return out, nil
}

// rollbackIdentity gives back one identity's step, or marks it rolled back if it has none yet.
func (s *Service) rollbackIdentity(ctx context.Context, base, idemKey string) ([]Returned, error) {
	for range rollbackReads {
		state, attempt, rs, err := s.scripts.record(ctx, base, idemKey)
		if err != nil {
			return nil, err
		}
		if state == "R" {
			return nil, nil
		}
		if state != "D" {
			attempt, rs = "", nil
		}
		status, given, err := s.scripts.giveBack(ctx, base, modeRollback, attempt, idemKey, rs)
		if err != nil {
			return nil, err
		}
		switch status {
		case giveBackNone:
			return nil, nil
		case giveBackDone:
			var out []Returned
			for i := range rs {
				if given[i] == 0 {
					continue
				}
				w, err := ParseWindowID(rs[i].windowID)
				if err != nil {
					return nil, err
				}
				out = append(out, Returned{Dimension: rs[i].dim, Window: w, Amount: given[i]})
			}
			return out, nil
		}
		// giveBackReread: a deduct of this idemKey changed the record since we read it; read again
	}
	return nil, fmt.Errorf("record of %s keeps changing", idemKey)
}
