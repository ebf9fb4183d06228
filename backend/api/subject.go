package api

import (
	"fmt"
	"strconv"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/quota"
	"vouchergate/shared/wire"
)

// The end user a request acts for: a shopper. The edge verifies a shopper's token and forwards
// its subject in X-VG-Subject, and the other quota identities the token carries (DEVICE,
// PHONE... in the claims the operator mapped) in X-VG-Identities, with its own service key; the
// backend trusts both only from a key with scope edge (keys.go: from any other key, or with no
// keys configured, X-VG-Subject is a 403, not ignored, so that an edge whose key lacks the
// scope fails loudly instead of running unchecked). A shopper acts only as itself:
//
//   - reserve and validate: the body's customerId must be the subject (403);
//   - orderIds: a shopper's are its own (wire.ShopperOrderID), so one it reserves never takes,
//     blocks or answers another customer's orderId of the same string; confirm and release
//     find the shopper's own order, or a service's order of that orderId made for the
//     shopper (voucher.Service.StoredOrder);
//   - quota deduct and check: every item's identity must be the shopper's (USER the subject,
//     another type one of its token's values for that type; 403);
//   - idemKeys: a shopper's are its own (quota.Caller), so another shopper's deduct, check or
//     rollback with the same string never meets them; within its own, retries, checks and
//     rollbacks behave as a service's (a rollback sent before a timed-out deduct lands wins);
//   - quota usage: the identity asked about must be the shopper's (403).
//
// No oracle: to a shopper, another customer's orderId or idemKey is answered exactly as one
// nobody used, on every route; a 403 is only ever about the shopper's own token (a customerId
// or identity that is not its own), whatever exists. Without a shopper (a service calling for
// any customer) none of this applies, and a service names a shopper's order to confirm or
// release it by its orderId, with ?customerId= when several shoppers reserved that orderId, and
// rolls back or checks a shopper's deduct with ?customerId= naming the shopper.
// A 403 here is counted as subject_mismatch.

// SubjectHeader carries the shopper's subject from a key with scope edge.
const SubjectHeader = "X-VG-Subject"

// IdentitiesHeader carries the shopper's other quota identities (wire.EncodeIdentities) beside
// SubjectHeader.
const IdentitiesHeader = "X-VG-Identities"

// notTheShopper answers 403 for a request that acts for someone other than its shopper.
func (s *Server) notTheShopper(ctx *fasthttp.RequestCtx, what string) {
	s.refuse(ctx, refusedSubject, fasthttp.StatusForbidden, wire.CodeForbidden, what+" is not the shopper's own (the end user named by "+SubjectHeader+")")
}

// shopperMayReserve reports whether a reservation for customer may go on; it answers the 403
// when not.
func (s *Server) shopperMayReserve(ctx *fasthttp.RequestCtx, sh *wire.Shopper, customer string) bool {
	if sh == nil || sh.Subject == customer {
		return true
	}
	s.notTheShopper(ctx, "customerId")
	return false
}

// shopperOwnsItems reports whether every item's identity is the shopper's; it answers the 403
// when not.
func (s *Server) shopperOwnsItems(ctx *fasthttp.RequestCtx, sh *wire.Shopper, items []quota.Item) bool {
	if sh == nil {
		return true
	}
	for i := range items {
		if !sh.Owns(items[i].IdentityType, items[i].Identity) {
			s.notTheShopper(ctx, "the identity "+items[i].IdentityType+" of items["+strconv.Itoa(i)+"]")
			return false
		}
	}
	return true
}

// shopperMayRead reports whether usage of the identity may be read; it answers the 403 when not.
func (s *Server) shopperMayRead(ctx *fasthttp.RequestCtx, sh *wire.Shopper, identityType, identity string) bool {
	if sh == nil || sh.Owns(identityType, identity) {
		return true
	}
	s.notTheShopper(ctx, "the identity asked about")
	return false
}

// quotaCalls are the quota calls of the request's caller: the shopper's own idemKeys, or the
// services'.
func (s *Server) quotaCalls(sh *wire.Shopper) quota.Caller {
	if sh == nil {
		return s.quotas.As("")
	}
	return s.quotas.As(sh.Subject)
}

// quotaCallsNamed are the calls a rollback or check acts with: quotaCalls, but a service may
// name a shopper with ?customerId= (its subject) to act on that shopper's idemKeys, as a
// checkout rolling back the deduct a shopper made through the edge under the order's idemKey
// must. A shopper's call ignores it: its idemKeys are its own. It answers 400 for a customerId
// no subject can be.
func (s *Server) quotaCallsNamed(ctx *fasthttp.RequestCtx, sh *wire.Shopper) (quota.Caller, bool) {
	q := ctx.QueryArgs()
	if sh != nil || !q.Has("customerId") {
		return s.quotaCalls(sh), true
	}
	named := q.Peek("customerId")
	if err := checkSubject(string(named)); err != nil {
		badRequest(ctx, err)
		return quota.Caller{}, false
	}
	return s.quotas.As(string(named)), true
}

// checkSubject holds a customerId naming a shopper to the rule the edge holds a token's sub to.
func checkSubject(sub string) error {
	if sub == "" || len(sub) > wire.MaxCustomerLen {
		return fmt.Errorf("customerId is %d bytes; a shopper's is 1 to %d", len(sub), wire.MaxCustomerLen)
	}
	return wire.CheckText("customerId", sub)
}
