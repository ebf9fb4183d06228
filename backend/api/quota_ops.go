package api

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/quota"
	"vouchergate/shared/wire"
)

// POST /quotas/ops: the QuotaOpCmd of the quota design the shops' Java clients were written
// against (wire.QuotaOpCmd), so that they call this API without an adapter. It is the same
// operation as /quotas/deduct or /quotas/rollback under the same rules and idemKeys, answered
// with the same bodies and codes:
//
//   - opType, by Options.QuotaOps (1 = DEDUCT, 2 = ROLLBACK by default): a deduct, or a rollback,
//     whole without opItems (absent, null or []) and partial with them;
//   - userInfoType, by the same mapping (1 = USER, 2 = DEVICE, 3 = PHONE): the identity type,
//     userInfoId the identity;
//   - dimensions as the design writes them, TYPE_VALUE ("T_GAME" is dimension T:GAME,
//     "P_ITEM_1001" is P:ITEM_1001), or already NAME:VALUE;
//   - opNum: the item's amount, from 1;
//   - expireTime: the TTL in seconds the design's clients compute for a counter. The rules'
//     windows decide when a counter resets here (a DAY rule's counter lives until the end of
//     its day in its time zone, which is what the design's clients compute), so it is read,
//     checked to be an int from 0, and otherwise not used;
//   - a partial rollback's rollbackKey: the body's own (this API's extension), or, without one,
//     one named by its items, so that a retry of the same body gives back once (two partial
//     rollbacks of the very same items need a rollbackKey each, or one with their sum).

// opKind is what a QuotaOpCmd asks.
type opKind int

const (
	opDeduct opKind = iota
	opRollback
)

// quotaOp is a QuotaOpCmd read and mapped.
type quotaOp struct {
	kind        opKind
	bizID       int64
	idemKey     string
	rollbackKey string
	items       []quota.Item // nil: a whole rollback
}

// decodeQuotaOp reads a POST /quotas/ops body with m, naming the first field it cannot map.
// Bounds that the deduct and rollback check are left to them, but for the lengths of the lists.
func decodeQuotaOp(body []byte, m *wire.QuotaOpMapping) (quotaOp, error) {
	var cmd wire.QuotaOpCmd
	if err := decodeJSON(body, &cmd, strict); err != nil {
		return quotaOp{}, err
	}
	op := quotaOp{bizID: cmd.BizID, idemKey: cmd.IdemKey, rollbackKey: cmd.RollbackKey}
	switch m.OpTypes[cmd.OpType] {
	case wire.OpDeduct:
		op.kind = opDeduct
		if cmd.RollbackKey != "" {
			return quotaOp{}, errors.New("rollbackKey is for a rollback's opType, not a deduct's")
		}
	case wire.OpRollback:
		op.kind = opRollback
	default:
		return quotaOp{}, fmt.Errorf("opType %d is neither the deduct's nor the rollback's (%s)", cmd.OpType, opTypesText(m))
	}
	if len(cmd.OpItems) > wire.MaxQuotaItems {
		return quotaOp{}, errors.New("opItems holds more than " + strconv.Itoa(wire.MaxQuotaItems) + " items; at most " + strconv.Itoa(wire.MaxQuotaItems))
	}
	if op.kind == opRollback && len(cmd.OpItems) == 0 {
		if cmd.RollbackKey != "" {
			return quotaOp{}, errors.New("rollbackKey is for a partial rollback: give opItems (without both, the whole deduct is rolled back)")
		}
		return op, nil
	}
	op.items = make([]quota.Item, len(cmd.OpItems))
	for i := range cmd.OpItems {
		it, err := opItem(i, &cmd.OpItems[i], m)
		if err != nil {
			return quotaOp{}, err
		}
		op.items[i] = it
	}
	if op.kind == opRollback && op.rollbackKey == "" {
		op.rollbackKey = quota.PartialKey(op.items)
	}
	return op, nil
}

// opItem maps the i-th QuotaOpItem.
func opItem(i int, it *wire.QuotaOpItem, m *wire.QuotaOpMapping) (quota.Item, error) {
	field := func(name string) string { return "opItems[" + strconv.Itoa(i) + "]." + name }
	typ, ok := m.UserInfoTypes[it.UserInfoType]
	if !ok {
		return quota.Item{}, fmt.Errorf("%s %d is not a mapped identity type (%s)", field("userInfoType"), it.UserInfoType, userInfoTypesText(m))
	}
	if it.ExpireTime < 0 || it.ExpireTime > wire.MaxInt32 {
		return quota.Item{}, fmt.Errorf("%s must be from 0 to %d (seconds; the rules' windows decide when counters reset)", field("expireTime"), wire.MaxInt32)
	}
	if it.OpNum < 1 || it.OpNum > wire.MaxQuotaAmount {
		return quota.Item{}, fmt.Errorf("%s must be from 1 to %d", field("opNum"), wire.MaxQuotaAmount)
	}
	if len(it.Dimensions) > wire.MaxItemDimensions {
		return quota.Item{}, errors.New(field("dimensions") + " holds more than " + strconv.Itoa(wire.MaxItemDimensions) + " dimensions; at most " + strconv.Itoa(wire.MaxItemDimensions))
	}
	dims := make([]string, len(it.Dimensions))
	for j, d := range it.Dimensions {
		var ok bool
		if dims[j], ok = wire.QuotaOpDimension(d); !ok {
			return quota.Item{}, fmt.Errorf("%s[%d] %q must be TYPE_VALUE, as in T_GAME or P_ITEM_1001, or NAME:VALUE", field("dimensions"), j, clip(d))
		}
	}
	return quota.Item{IdentityType: typ, Identity: it.UserInfoID, Dimensions: dims, Amount: it.OpNum}, nil
}

func opTypesText(m *wire.QuotaOpMapping) string       { return numberedText(m.OpTypes) }
func userInfoTypesText(m *wire.QuotaOpMapping) string { return numberedText(m.UserInfoTypes) }

// numberedText lists a mapping as VG_QUOTA_*_TYPES writes it, by number.
func numberedText(m map[int64]string) string {
	nums := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(nums))
	for i, n := range nums {
		parts[i] = strconv.FormatInt(n, 10) + " = " + m[n]
	}
	return strings.Join(parts, ", ")
}

// quotaOps answers POST /quotas/ops as /quotas/deduct or /quotas/rollback answers the
// operation: 200 wire.QuotaDeductResponse or wire.QuotaRollbackResponse, 409 as theirs, 400
// naming the field, 403 (a shopper's item of another identity), 413, 503.
func (s *Server) quotaOps(ctx *fasthttp.RequestCtx, sh *wire.Shopper) {
	op, err := decodeQuotaOp(ctx.PostBody(), &s.opts.QuotaOps)
	if err != nil {
		badRequest(ctx, err)
		return
	}
	if op.kind == opDeduct {
		if s.shopperOwnsItems(ctx, sh, op.items) {
			s.deductItems(ctx, sh, op.bizID, op.idemKey, op.items)
		}
		return
	}
	s.rollbackItems(ctx, sh, op.bizID, op.idemKey, op.rollbackKey, op.items)
}
