package quota

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"vouchergate/lua"
	"vouchergate/shared/wire"
)

// RollbackItems gives back part of what the deduct with idemKey took: for each item (an
// identity, dimensions and an amount, as a deduct's item), Amount on every counter of that
// identity's step that the item's dimensions name and on its "*" counters (which count every
// item), but no more than is left of it on each counter it names: what the step took there less
// what was given back before. So a "*" counter never gives back more of an item than is left of
// it on the item's own counters, and no counter ever gives back more than the step took. (The
// record keeps counters, not items: an item that only "*" counts is held to what is left on
// "*".) A refund of 1 of 3 units is the deduct's item with Amount 1.
//
// rollbackKey names this partial rollback: it acts once per idemKey, whatever identities the
// items name, and the same rollbackKey with the same items again answers what it gave back the
// first time, changing nothing (Replayed set); with other items (another identity, a part of
// them, another amount) it is ErrRollbackKeyReused. The idemKey is not marked rolled back: a
// whole Rollback later gives back the rest. Identities are visited one by one, each step atomic and idempotent by rollbackKey,
// so partial rollbacks racing each other (on any backend) give back exactly their sum, capped
// at what was taken. An identity the idemKey took nothing from gives back nothing and keeps that
// as the rollbackKey's answer.
//
// Errors: ErrInvalid, ErrRollbackKeyReused, ErrUnavailable (retry with the same rollbackKey:
// what was given back stays given back, once).
func (s *Service) RollbackItems(ctx context.Context, bizID int64, idemKey, rollbackKey string, items []Item) (RollbackResult, error) {
	return s.As("").RollbackItems(ctx, bizID, idemKey, rollbackKey, items)
}

// RollbackItems is Service.RollbackItems with the caller's idemKeys.
func (c Caller) RollbackItems(ctx context.Context, bizID int64, idemKey, rollbackKey string, items []Item) (RollbackResult, error) {
	if err := validateDeduct(bizID, idemKey, items); err != nil {
		return RollbackResult{}, err
	}
	if err := checkID("rollbackKey", rollbackKey, wire.MaxIdemKeyLen); err != nil {
		return RollbackResult{}, err
	}
	s := c.s
	s.metrics.rollbacks.Add(1)
	res, err := s.rollbackItems(ctx, bizID, c.stored(idemKey), rollbackKey, items)
	res.IdemKey = idemKey
	if errors.Is(err, ErrUnavailable) {
		s.metrics.unavailable.Add(1)
	}
	return res, err
}

func (s *Service) rollbackItems(ctx context.Context, bizID int64, idemKey, rollbackKey string, items []Item) (RollbackResult, error) {
	sorted := slices.Clone(items)
	slices.SortStableFunc(sorted, func(a, b Item) int {
		if c := strings.Compare(a.IdentityType, b.IdentityType); c != 0 {
			return c
		}
		return strings.Compare(a.Identity, b.Identity)
	})
	bound, err := s.scripts.bindRollbackKey(ctx, requestKey(s.cfg.KeyPrefix, bizID, idemKey), rollbackKey, itemsFingerprint(items))
	switch {
	case err != nil:
		return RollbackResult{}, unavailable("roll back part of "+idemKey, err)
	case bound == rollbackKeyTaken:
		return RollbackResult{}, ErrRollbackKeyReused
	}
	out := RollbackResult{IdemKey: idemKey, Returned: []Returned{}, Replayed: bound == rollbackKeyBoundBefore}
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j].IdentityType == sorted[i].IdentityType && sorted[j].Identity == sorted[i].Identity {
			j++
		}
		typ, identity := sorted[i].IdentityType, sorted[i].Identity
		got, gaveNow, err := s.partialIdentity(ctx, identityBase(s.cfg.KeyPrefix, bizID, typ, identity), idemKey, rollbackKey,
			fingerprint(sorted[i:j], typ, identity), sorted[i:j])
		if gaveNow {
			out.Replayed = false // a retry finishing what an interrupted first call began
		}
		if err != nil {
			if errors.Is(err, ErrRollbackKeyReused) {
				return RollbackResult{}, err
			}
			return RollbackResult{}, unavailable("roll back part of "+idemKey, err)
		}
		for k := range got {
			got[k].IdentityType, got[k].Identity = typ, identity
			s.metrics.givenBack.Add(uint64(got[k].Amount))
		}
		out.Returned = append(out.Returned, got...)
		i = j
	}
	return out, nil
}

// partialIdentity gives back one identity's part (quota_partial.lua), reading its record again
// while a deduct of the idemKey changes it. now tells whether this call gave back (not an
// earlier call of the rollbackKey).
func (s *Service) partialIdentity(ctx context.Context, base, idemKey, rollbackKey, fp string, items []Item) (_ []Returned, now bool, _ error) {
	for range rollbackReads {
		// as read, whatever the state: the script decides by the record as it is then, and
		// answers a rollbackKey's earlier answer about the counters it names
		_, attempt, rs, err := s.scripts.record(ctx, base, idemKey)
		if err != nil {
			return nil, false, err
		}
		status, given, err := s.scripts.partial(ctx, base, idemKey, attempt, rollbackKey, fp, rs, items)
		if err != nil {
			return nil, false, err
		}
		switch status {
		case partialNone:
			return nil, false, nil
		case partialReused:
			return nil, false, ErrRollbackKeyReused
		case partialDone, partialReplayed:
			got, err := returned(rs, given)
			return got, status == partialDone, err
		}
		// partialReread: a deduct of this idemKey took since we read the record
	}
	return nil, false, fmt.Errorf("record of %s keeps changing", idemKey)
}

// returned lists what given gave back to the counters of rs.
func returned(rs []recorded, given []int64) ([]Returned, error) {
	var out []Returned
	for i := range rs {
		if i >= len(given) || given[i] == 0 {
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

// PartialKey names a partial rollback by its items, whatever their order: for callers whose
// requests carry no rollbackKey of their own (POST /quotas/ops), so that the same request sent
// again gives back once.
func PartialKey(items []Item) string { return "items-" + itemsFingerprint(items) }

// itemsFingerprint names items (identities, dimensions and amounts), whatever their order.
func itemsFingerprint(items []Item) string {
	var sum uint64
	for i := range items {
		it := &items[i]
		var dims uint64
		for _, d := range it.Dimensions {
			dims += fnv1a(fnvOffset, d)
		}
		h := fnv1a(fnv1a(fnvOffset, it.IdentityType), "\x00"+it.Identity)
		sum += fnvMix(fnvMix(h, dims), uint64(it.Amount))
	}
	return strconv.FormatUint(sum, 36)
}

// Outcomes of quota_rollback_key.lua.
const (
	rollbackKeyBound       = 1
	rollbackKeyBoundBefore = 2 // to the same items
	rollbackKeyTaken       = 0 // by other items
)

// bindRollbackKey binds rollbackKey to the fingerprint of all its items on the request reqKey
// (quota_rollback_key.lua), so that it acts once per idemKey across identities.
func (sc *scripts) bindRollbackKey(ctx context.Context, reqKey, rollbackKey, fp string) (int64, error) {
	out, err := sc.run(ctx, lua.QuotaRollbackKey, []string{rollbackKeysKey(reqKey)}, rollbackKey, fp, sc.idemTTL).Int64()
	if err == nil && out != rollbackKeyBound && out != rollbackKeyBoundBefore && out != rollbackKeyTaken {
		err = fmt.Errorf("quota_rollback_key.lua answered %d", out)
	}
	return out, err
}

// Outcomes of quota_partial.lua.
const (
	partialDone     = 1
	partialReplayed = 2
	partialNone     = 0
	partialReread   = -1
	partialReused   = -3
)

// partial runs quota_partial.lua on an identity's record and every counter it names, for items:
// each item names the counters of its dimensions (the "*" counters count every item).
func (sc *scripts) partial(ctx context.Context, base, idemKey, attempt, rollbackKey, fp string, rs []recorded, items []Item) (int64, []int64, error) {
	keys := make([]string, 2, 2+2*len(rs))
	keys[0], keys[1] = recordKey(base, idemKey), resetsKey(base)
	args := make([]any, 6, 7+3*len(rs)+3*len(items))
	args[0], args[1], args[2], args[3], args[4], args[5] = attempt, idemKey, "p:"+rollbackKey, fp, sc.idemTTL, len(rs)
	for i := range rs {
		keys = appendCounterKeys(keys, base, rs[i].kind, rs[i].seg, rs[i].dim)
		star := "0"
		if rs[i].dim == "*" {
			star = "1"
		}
		args = append(args, kindArg(rs[i].kind), rs[i].amount, star)
	}
	args = append(args, len(items))
	for _, it := range items {
		at := len(args)
		args = append(args, it.Amount, 0)
		for i := range rs {
			if rs[i].dim != "*" && slices.Contains(it.Dimensions, rs[i].dim) {
				args = append(args, i+1)
			}
		}
		args[at+1] = len(args) - at - 2
	}
	v, err := sc.run(ctx, lua.QuotaPartial, keys, args...).Slice()
	if err != nil {
		return 0, nil, err
	}
	status, _ := v[0].(int64)
	if status != partialDone && status != partialReplayed {
		return status, nil, nil
	}
	text, _ := v[1].(string)
	given := make([]int64, 0, len(rs))
	for text != "" {
		var tok string
		tok, text, _ = cutSpace(text)
		n, err := strconv.ParseInt(tok, 10, 64)
		if err != nil {
			return 0, nil, fmt.Errorf("quota_partial.lua answered %v", v)
		}
		given = append(given, n)
	}
	if len(given) != len(rs) {
		return 0, nil, fmt.Errorf("quota_partial.lua answered %v for %d counters", v, len(rs))
	}
	return status, given, nil
}
